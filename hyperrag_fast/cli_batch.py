"""``hyperrag query INDEX --questions FILE`` (``-`` = stdin): many questions from one
process, the index loaded once, one JSON line per question, in input order.

Input, one question per line (UTF-8; blank lines skipped): a JSON object
``{"question": "...", "id": ...}`` (``id`` optional), a JSON string, or plain text
(a line starting with ``{`` must be a JSON object).
A line's id defaults to its 1-based line number. Every line is checked before the
first query: a bad line is a one-line error naming its number, and nothing is printed.
"""
from __future__ import annotations

import codecs
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

BATCH = 64  # questions embedded per call


def read_questions(source: str) -> list[tuple[Any, str]]:
    """``(id, question)`` pairs of a questions file, or of stdin for ``-``."""
    if source == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text stream put in place of stdin (the API, tests)
            return _questions(sys.stdin.read(), source)
        data, name = stream.read(), "<stdin>"
    else:
        p = Path(source)
        if not p.is_file():
            raise ValueError(f"no such questions file: {source}")
        data, name = p.read_bytes(), source
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        at = e.start + 3 * data.startswith(codecs.BOM_UTF8)  # the error counts after the BOM
        raise ValueError(f"{name}: not UTF-8 text (byte 0x{data[at]:02x} at byte {at}); "
                         f"questions files are read as UTF-8: convert it, e.g. "
                         f"iconv -f latin1 -t utf-8") from None
    return _questions(text, source)


def _questions(text: str, source: str) -> list[tuple[Any, str]]:
    out: list[tuple[Any, str]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            out.append(_parse(line.strip(), n, source))
    if not out:
        raise ValueError(f"{source}: no questions")
    return out


def _parse(line: str, n: int, source: str) -> tuple[Any, str]:
    where = f"{source} line {n}"
    qid: Any = n
    q: Any = line
    if line[0] in "{\"":
        try:
            v = json.loads(line)
        except RecursionError:
            raise ValueError(f"{where}: invalid JSON (nested too deeply)") from None
        except json.JSONDecodeError as e:
            if line[0] == "\"":  # plain text that starts with a quote
                v = line
            else:
                raise ValueError(f"{where}: invalid JSON ({e.msg}); write plain text or an "
                                 f'object {{"question": ..., "id": ...}}') from None
        if isinstance(v, dict):
            if "question" not in v:
                raise ValueError(f'{where}: object has no "question" field')
            q, qid = v["question"], v.get("id", n)
        else:
            q = v
    if not isinstance(q, str):
        raise ValueError(f"{where}: the question must be a string, got {type(q).__name__}")
    if not q.strip():
        raise ValueError(f"{where}: empty question")
    try:
        q.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{where}: the question holds a lone surrogate "
                         f"U+{ord(q[e.start]):04X}, which is not text") from None
    return qid, q


def run_batch(questions: list[tuple[Any, str]], retrieve_batch: Callable[[list[str]], list],
              render: Callable[[Any], dict[str, Any]]) -> Iterator[str]:
    """JSON lines ``{"id", **render(result)}``, embedding ``BATCH`` questions per call."""
    for b in range(0, len(questions), BATCH):
        part = questions[b:b + BATCH]
        for (qid, _), res in zip(part, retrieve_batch([q for _, q in part])):
            yield json.dumps({"id": qid, **render(res)}, ensure_ascii=False,
                             default=lambda v: v.tolist())
