"""Where the hop the question does not name gets lost (issue 15, item 2).

    python benchmarks/diagnose_hops.py --embedder bge-small \\
        --index 2wikimultihopqa=indexes/2wiki_bge --index hotpotqa_train=indexes/hotpot_bge \\
        --out benchmarks/results/hop_diagnosis

For 2WikiMultiHopQA dev (compositional, inference, bridge_comparison), the HotpotQA sample
(bridge questions) and MuSiQue dev (2-4 hops; passages of titles with several paragraphs
also summarised apart), every gold passage whose title the question does not contain (after
name normalisation) is a second-hop passage. For each: is it in C_q, its prior rank and
prior share in C_q, its final rank, and its rank with each channel removed (spatial,
temporal, PPR; the second round is added when the default has it off): a channel
"moved" it when removing the channel ranks it lower (for an added second round: when
adding it ranks it higher, reported with the sign flipped). Labels (titles, gold) are read for this report only, never by the retriever.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from hyperrag_fast.config import TUNED, QueryOptions, preset_for
from hyperrag_fast.embed.registry import make_embedder
from hyperrag_fast.eval.harness import _git, machine_info
from hyperrag_fast.lexical import normalize_name
from hyperrag_fast.methods import METHODS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality_search import Bench  # noqa: E402

TYPES = {"2wikimultihopqa": ("compositional", "inference", "bridge_comparison"),
         "hotpotqa_train": ("bridge",), "musique_dev": ("2hop", "3hop", "4hop")}
SPLITS = {"2wikimultihopqa": "dev", "hotpotqa_train": "test", "musique_dev": "all"}
DEEP = 50  # ranks are read from the top-50 (= K_C); deeper counts as 51


#: the second round tried when the default has it off
HOP_ON = {"hop_chunks": 1, "hop_value": 0.5, "hop_max_group": 2, "hop_weight": "sim"}


def variants(o: QueryOptions) -> dict[str, QueryOptions]:
    """Each channel removed; "hop" toggles the second round (removed when the default
    has it, else added with :data:`HOP_ON`); "titles" removes the named-title term and the
    second round's start from named titles."""
    s, h = o.stitch, o.hybrid
    hop = {"hop_chunks": 0} if h.hop_chunks else HOP_ON
    return {"spatial": replace(o, stitch=s.replace(spatial=False)),
            "temporal": replace(o, stitch=s.replace(temporal=False)),
            "ppr": replace(o, stitch=s.replace(ppr="none")),
            "stibp": replace(o, stitch=s.replace(spatial=False, temporal=False)),
            "hop": replace(o, hybrid=replace(h, **hop)),
            "titles": replace(o, hybrid=replace(h, title_chunks=0.0, hop_titles=False))}


def rank_of(ids: np.ndarray, c: int) -> int:
    hit = np.flatnonzero(np.asarray(ids) == c)
    return int(hit[0]) + 1 if hit.size else DEEP + 1


def diagnose(b: Bench, dataset: str, o: QueryOptions) -> list[dict]:
    state, fn = b.r.state, METHODS[o.method]
    o = o.with_top_k(min(DEEP, o.k_chunks))
    var = variants(o)
    row_of = {p: i for i, p in enumerate(b.ds.passages)}
    paragraphs: dict[str, int] = {}
    for c in b.ds.chunks:
        paragraphs[c.title] = paragraphs.get(c.title, 0) + 1
    rows = []
    for q, lab, v in zip(b.ds.questions, b.ds.labels, b.qvecs):
        if lab.qtype not in TYPES[dataset]:
            continue
        qn = f" {normalize_name(q.question)} "
        second = [p for p in lab.gold if f" {normalize_name(p.split(chr(10), 1)[0])} " not in qn]
        if not second:
            continue
        out = fn(state, v, q.question, o, True)
        d = out.detail
        cq, prior = np.asarray(d["cq"]), np.asarray(d["cq_prior"], dtype=float)
        order = cq[np.argsort(-prior, kind="stable")]
        without = {k: fn(state, v, q.question, x, False).chunk_ids for k, x in var.items()}
        for p in second:
            c = row_of[p]
            pos = np.flatnonzero(cq == c)
            final = rank_of(out.chunk_ids, c)
            gold_rows = {row_of[g] for g in lab.gold}
            rows.append({
                "qid": q.qid, "type": lab.qtype, "question": q.question,
                "passage": p.split("\n", 1)[0], "in_cq": bool(pos.size), "cq_size": int(cq.size),
                "title_paragraphs": paragraphs[p.split("\n", 1)[0]],
                "prior_rank": rank_of(order, c) if pos.size else None,
                "prior_share": float(prior[pos[0]] / prior.sum()) if pos.size and prior.sum() > 0 else 0.0,
                "final_rank": final,
                "top1_is_gold": int(out.chunk_ids[0]) in gold_rows,
                "title_in_top1_text": f" {normalize_name(p.split(chr(10), 1)[0])} " in
                                      f" {normalize_name(b.ds.passages[int(out.chunk_ids[0])])} ",
                "rank_without": {k: rank_of(ids, c) for k, ids in without.items()},
                "overtaken_by_ppr": overtakers(state.engines[d["graph"]].graph, b.ds.chunks, c,
                                               out.chunk_ids, without["ppr"], order[:3], gold_rows)})
    return rows


def overtakers(g, chunks, c: int, ranked: np.ndarray, no_ppr: np.ndarray,
               prior_top: np.ndarray, gold: set) -> list[dict]:
    """The chunks PPR ranks above gold chunk ``c`` that rank below it without PPR, each
    with how the graph reaches it: whether another paragraph of its title is in the
    prior's top 3 (a page of several paragraphs), and the smallest name group it shares
    with a prior-top-3 chunk (its size in chunks; whether it is a title's name)."""
    above = [int(x) for x in ranked[:rank_of(ranked, c) - 1]]
    r_without = {int(x): i for i, x in enumerate(no_ppr.tolist())}
    mine = r_without.get(c, DEEP)
    groups = lambda x: set(g.node_group[g.chunk_nodes[g.chunk_ptr[x]:g.chunk_ptr[x + 1]]].tolist())  # noqa: E731
    top_groups = {}
    for t in prior_top.tolist():
        for grp in groups(int(t)):
            top_groups.setdefault(grp, set()).add(int(t))
    titles = {normalize_name(ch.title) for ch in chunks}
    out = []
    for o in above:
        if r_without.get(o, DEEP) <= mine:
            continue  # ranked above c without PPR too: not PPR's doing
        shared = [grp for grp in groups(o) if grp in top_groups and top_groups[grp] - {o}]
        size = min((int(g.group_chunks[grp]) for grp in shared), default=None)
        out.append({"chunk": o, "gold": o in gold, "title": chunks[o].title,
                    "same_title_in_prior_top3": any(chunks[int(t)].title == chunks[o].title
                                                    for t in prior_top.tolist() if int(t) != o),
                    "shared_group_chunks": size,
                    "shared_title_group": any(g.group_key[grp] in titles for grp in shared)
                    if g.group_key else None})
    return out


def summary(rows: list[dict]) -> dict:
    if not rows:
        return {"n": 0}
    added = {"hop"} if not TUNED.hybrid.hop_chunks else set()
    up = lambda r, k: (r["rank_without"][k] < r["final_rank"] if k in added  # noqa: E731
                       else r["rank_without"][k] > r["final_rank"])
    down = lambda r, k: (r["rank_without"][k] > r["final_rank"] if k in added  # noqa: E731
                         else r["rank_without"][k] < r["final_rank"])
    moved = {k: float(np.mean([up(r, k) for r in rows])) for k in rows[0]["rank_without"]}
    hurt = {k: float(np.mean([down(r, k) for r in rows])) for k in rows[0]["rank_without"]}
    pr = [r["prior_rank"] for r in rows if r["prior_rank"] is not None]
    ov = [o for r in rows for o in r.get("overtaken_by_ppr", []) if not o["gold"]]
    why = {"n_non_gold_overtakers": len(ov)}
    if ov:
        why.update(same_title_paragraph=float(np.mean([o["same_title_in_prior_top3"] for o in ov])),
                   linked_to_prior_top3=float(np.mean([o["shared_group_chunks"] is not None for o in ov])),
                   via_title_group=float(np.mean([bool(o["shared_title_group"]) for o in ov])),
                   via_group_over_5_chunks=float(np.mean([(o["shared_group_chunks"] or 0) > 5 for o in ov])),
                   not_linked=float(np.mean([o["shared_group_chunks"] is None for o in ov])))
    lost = [r for r in rows if r["final_rank"] > 5]
    where = {"n": len(lost),  # a gold passage out of the top 5: where it was lost
             "not_in_cq": sum(not r["in_cq"] for r in lost),
             "prior_rank_over_10": sum(r["in_cq"] and r["prior_rank"] > 10 for r in lost),
             "prior_rank_6_10": sum(r["in_cq"] and 5 < r["prior_rank"] <= 10 for r in lost),
             "prior_top5_final_below": sum(r["in_cq"] and r["prior_rank"] <= 5 for r in lost),
             "top5_without_ppr": sum(r["rank_without"]["ppr"] <= 5 for r in lost),
             "title_named_by_top1": sum(bool(r.get("title_in_top1_text")) for r in lost),
             "top1_is_gold": sum(bool(r.get("top1_is_gold")) for r in lost),
             "title_with_several_paragraphs": sum(r["title_paragraphs"] > 1 for r in lost)}
    return {"why_ppr_overtakes": why, "lost_at_5": where, "n": len(rows),
            "in_cq": float(np.mean([r["in_cq"] for r in rows])),
            "prior_rank_median": float(np.median(pr)) if pr else None,
            "prior_share_median": float(np.median([r["prior_share"] for r in rows])),
            "final_rank_median": float(np.median([r["final_rank"] for r in rows])),
            "in_top2": float(np.mean([r["final_rank"] <= 2 for r in rows])),
            "in_top5": float(np.mean([r["final_rank"] <= 5 for r in rows])),
            "moved_up_by": moved, "pushed_down_by": hurt}


def render(out: dict) -> str:
    lines = [f"# Second-hop gold passages ({out['embedder']})", "", f"Command: `{out['command']}`", "",
             "A second-hop passage is a gold passage whose title the question does not contain. "
             "'moved up by X': share of them ranked lower once X is removed; 'pushed down by X': "
             "ranked higher once X is removed. " + (
                 "The second round is on in the default: its columns say what removing it does; "
                 "'titles' removes the named-title term and the round's start from named titles."
                 if out.get("hop_in_default") else
                 "The second round is off in the default: its columns say what adding it "
                 "(1 chunk, value .5, sim) would do."), "",
             "| set | type | n | in C_q | prior rank (median) | prior share (median) | final rank (median) "
             "| in top-2 | in top-5 | moved up by spatial/temporal/STIBP/PPR/2nd round/titles | pushed down by |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, types in out["summary"].items():
        for t, s in types.items():
            if not s["n"]:
                continue
            keys = [k for k in ("spatial", "temporal", "stibp", "ppr", "hop", "titles")
                    if k in s["moved_up_by"]]
            mv = "/".join(f"{s['moved_up_by'][k]:.2f}" for k in keys)
            pd = "/".join(f"{s['pushed_down_by'][k]:.2f}" for k in keys)
            lines.append(f"| {name} | {t} | {s['n']} | {s['in_cq']:.2f} | {s['prior_rank_median']} | "
                         f"{s['prior_share_median']:.3f} | {s['final_rank_median']} | {s['in_top2']:.2f} | "
                         f"{s['in_top5']:.2f} | {mv} | {pd} |")
    lines += ["", "## Where the second-hop passages out of the top 5 were lost", "",
              "Counts of second-hop gold passages ranked below 5: never in C_q; in C_q with the "
              "prior ranking them below 10 / 6-10; in the prior's top 5 but below 5 in the final "
              "ranking (the graph stage and the ranker pushed them out); of all of them, those "
              "in the top 5 without PPR, those whose title the final top chunk's text names (the "
              "bridge a title link could follow), those where the top chunk is gold, those of a "
              "title with several paragraphs.", "",
              "| set | type | lost | not in C_q | prior > 10 | prior 6-10 | prior top 5, final below "
              "| top 5 without PPR | title named by top chunk | top chunk gold | several paragraphs |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, types in out["summary"].items():
        for t, s in types.items():
            w = s.get("lost_at_5")
            if w:
                lines.append(f"| {name} | {t} | {w['n']} | {w['not_in_cq']} | {w['prior_rank_over_10']} | "
                             f"{w['prior_rank_6_10']} | {w['prior_top5_final_below']} | "
                             f"{w['top5_without_ppr']} | {w['title_named_by_top1']} | {w['top1_is_gold']} | "
                             f"{w['title_with_several_paragraphs']} |")
    lines += ["", "## What PPR ranks above a second-hop gold passage", "",
              "Non-gold chunks that PPR ranks above a second-hop gold passage they rank below "
              "without PPR. 'same-title paragraph': another paragraph of its page is in the "
              "prior's top 3; 'linked': it shares a name group with a prior-top-3 chunk; "
              "'via a title group': that group is a page title's name; '> 5 chunks': the "
              "smallest shared group spans more than 5 chunks; 'not linked': reached only "
              "through longer paths.", "",
              "| set | type | overtakers | same-title paragraph | linked to prior top 3 | via a title group "
              "| via a group > 5 chunks | not linked |", "|---|---|---|---|---|---|---|---|"]
    for name, types in out["summary"].items():
        for t, s in types.items():
            w = s.get("why_ppr_overtakes", {})
            if not w.get("n_non_gold_overtakers"):
                continue
            lines.append(f"| {name} | {t} | {w['n_non_gold_overtakers']} | {w['same_title_paragraph']:.2f} | "
                         f"{w['linked_to_prior_top3']:.2f} | {w['via_title_group']:.2f} | "
                         f"{w['via_group_over_5_chunks']:.2f} | {w['not_linked']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--index", action="append", required=True, help="DATASET=INDEX_DIR")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    emb = make_embedder(a.embedder)
    o = preset_for(emb.name)  # the library default of this embedder at this commit
    splits = SPLITS
    out = {"command": "python benchmarks/diagnose_hops.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": _git("rev-parse", "HEAD"),
           "git_dirty": bool(_git("status", "--porcelain")), "embedder": emb.name,
           "hop_in_default": bool(o.hybrid.hop_chunks), "summary": {}, "rows": {}}
    for x in a.index:
        dataset, path = x.split("=", 1)
        b = Bench(dataset, splits[dataset], path, emb, a.cache_dir, a.data_dir)
        rows = diagnose(b, dataset, o)
        out["rows"][dataset] = rows
        out["summary"][dataset] = {t: summary([r for r in rows if r["type"] == t])
                                   for t in TYPES[dataset]} | {"all": summary(rows)}
        if any(r["title_paragraphs"] > 1 for r in rows):  # pages of several paragraphs apart
            out["summary"][dataset]["title with several paragraphs"] = summary(
                [r for r in rows if r["title_paragraphs"] > 1])
            out["summary"][dataset]["title with one paragraph"] = summary(
                [r for r in rows if r["title_paragraphs"] == 1])
    Path(a.out + ".json").write_text(json.dumps(out, indent=1) + "\n")
    Path(a.out + ".md").write_text(render(out))
    print(render(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
