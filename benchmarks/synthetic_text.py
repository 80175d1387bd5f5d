"""Synthetic text corpus for whole-pipeline scaling runs (spaCy + ONNX + build + save).

    python benchmarks/synthetic_text.py --passages 10000 --out /tmp/syn10k.jsonl

Passages are JSONL records ``{id, title, text}`` shaped like 2WikiMultiHopQA's: a title
entity (the passage's subject, unique), 1 + Geometric sentences (mean 3.7, median 2-3,
p90 ~8, as measured on the 2Wiki corpus: 3.7 sentences, 71 words per passage) drawn from
templated biography / film / place sentences. Other names in a sentence are drawn from a
Zipf-Mandelbrot law P(k) ~ (k + 10)^-1 over pools that grow with the corpus (people
0.6 n, places 0.05 n + 200, organisations 0.02 n + 100, works 0.3 n), so a few names
recur everywhere (like "american" on 2Wiki) and most are rare. Deterministic per seed.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

SYL = ("ka lo mi ra ten vor sil dan mer ob ul gra bel tor nia ves ham rin dal cor an "
       "el is ost pra que fen lud mar nor sab tes wil zan bry cal dor").split()
PLACE_END = ("burg", "ton", "ville", "ford", "stadt", "mouth", "dale", "grad", "haven", "")
ORG_KIND = ("Records", "Pictures", "University", "Company", "Orchestra", "Institute",
            "Football Club", "Press", "Studios", "Railway")
ADJ = ("Silent", "Crimson", "Last", "Hidden", "Golden", "Broken", "Northern", "Quiet",
       "Seventh", "Burning", "Lonely", "Eternal")
NOUN = ("River", "Garden", "Winter", "Letter", "Harbour", "Crown", "Promise", "Station",
        "Mirror", "Frontier", "Voyage", "Empire")
OCC = ("composer", "painter", "politician", "actress", "film director", "novelist",
       "footballer", "architect", "singer", "journalist", "physician", "diplomat")
NAT = ("American", "British", "French", "German", "Italian", "Swedish", "Polish",
       "Brazilian", "Japanese", "Canadian")
GENRE = ("drama", "comedy", "western", "thriller", "musical", "documentary")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
TEMPLATES = (
    "{S} ({y1}–{y2}) was a {nat} {occ} who worked in {P} for most of {pos} career.",
    "{S} was born on {date} in {P}, the {rel} of {X} and {Y}.",
    "In {y1}, {S} married {X}, a {occ} from {P}, and the couple settled in {Q}.",
    "{S} directed the film {W}, which premiered in {P} in {y2}.",
    "{W} is a {y1} {nat} {genre} film directed by {X} and starring {Y} and {Z}.",
    "After studying at the {O}, {S} joined {O2} as a {occ} in {y1}.",
    "{S} died in {P} on {date} and was buried in the churchyard of {Q}.",
    "The film was produced by {O} and released in {P} during the autumn of {y2}.",
    "{X} later described {S} as one of the most influential {occ}s of {pos} generation.",
    "{S} served as mayor of {P} from {y1} until {y2}, succeeding {X} in that office.",
    "{pron} is best known for {W}, a work that {X} adapted for the stage in {y2}.",
    "{S} recorded several albums with {O} before moving to {P} with {X}.",
)


def _name(rng, lo, hi) -> str:
    return "".join(rng.choice(SYL, size=int(rng.integers(lo, hi + 1)))).capitalize()


class _Pool:
    """Distinct names, drawn by a Zipf-Mandelbrot law over their rank."""

    def __init__(self, names: list[str], rng: np.random.Generator, s=1.0, q=10.0) -> None:
        self.names = names
        w = (np.arange(len(names)) + q) ** -s
        self.cdf = np.cumsum(w / w.sum())
        self.rng = rng

    def draw(self) -> str:
        return self.names[min(int(np.searchsorted(self.cdf, self.rng.random())), len(self.names) - 1)]


def _distinct(make, n: int, rng) -> list[str]:
    out: dict[str, None] = {}
    while len(out) < n:
        out.setdefault(make(rng))
    return list(out)


def passages(n: int, seed: int = 0):
    """Yield ``n`` records ``{id, title, text}``."""
    rng = np.random.default_rng(seed)
    people = _distinct(lambda r: f"{_name(r, 1, 2)} {_name(r, 2, 3)}", int(0.6 * n) + 50, rng)
    places = _distinct(lambda r: _name(r, 2, 2) + r.choice(PLACE_END), int(0.05 * n) + 200, rng)
    orgs = _distinct(lambda r: f"{_name(r, 2, 2)} {r.choice(ORG_KIND)}", int(0.02 * n) + 100, rng)
    works = _distinct(lambda r: f"The {r.choice(ADJ)} {r.choice(NOUN)} of {_name(r, 2, 2)}",
                      int(0.3 * n) + 50, rng)
    P, O, Wk, Pe = (_Pool(x, rng) for x in (places, orgs, works, people))
    subjects = _distinct(lambda r: f"{_name(r, 1, 2)} {_name(r, 2, 3)} {_name(r, 1, 1)}", n, rng)
    for i, subj in enumerate(subjects):
        k = int(rng.geometric(1 / 3.7))
        female = bool(rng.random() < 0.4)
        sents = []
        for t in rng.integers(0, len(TEMPLATES), size=k):
            y1 = int(rng.integers(1820, 2010))
            sents.append(TEMPLATES[t].format(
                S=subj if rng.random() < 0.7 else ("She" if female else "He"),
                pron="She" if female else "He", pos="her" if female else "his",
                rel="daughter" if female else "son", y1=y1, y2=y1 + int(rng.integers(1, 60)),
                nat=rng.choice(NAT), occ=rng.choice(OCC), genre=rng.choice(GENRE),
                date=f"{int(rng.integers(1, 29))} {rng.choice(MONTHS)} {y1}",
                P=P.draw(), Q=P.draw(), X=Pe.draw(), Y=Pe.draw(), Z=Pe.draw(),
                O=O.draw(), O2=O.draw(), W=Wk.draw()))
        if not sents[0].startswith(subj):
            sents[0] = sents[0].replace("She ", subj + " ", 1).replace("He ", subj + " ", 1)
        yield {"id": f"syn-{i}", "title": subj, "text": " ".join(sents)}


def write(path: str | Path, n: int, seed: int = 0, start: int = 0) -> Path:
    """Write passages ``start .. n-1`` of the seeded corpus as JSONL."""
    path = Path(path)
    with open(path, "w", encoding="utf-8") as f:
        for i, rec in enumerate(passages(n, seed)):
            if i >= start:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passages", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    write(a.out, a.passages, a.seed)


if __name__ == "__main__":
    main()
