"""``hyperrag ask`` (grounded answer with citations) and ``hyperrag eval`` (retrieval
quality, or with ``--answers`` answer quality) for :mod:`hyperrag_fast.cli`.

LLM settings come from ``--base-url/--model/--api-key``, else OPENAI_BASE_URL /
OPENAI_MODEL / OPENAI_API_KEY (see :func:`hyperrag_fast.llm.client.resolve_settings`).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from .config import EVAL_LLM_CONCURRENCY, LLM_TIMEOUT_S


def add_llm_args(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """--{prefix}base-url / model / api-key (env OPENAI_* when not given)."""
    p.add_argument(f"--{prefix}base-url", default=None,
                   help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL)")
    p.add_argument(f"--{prefix}model", default=None, help="model name (default $OPENAI_MODEL)")
    p.add_argument(f"--{prefix}api-key", default=None, help="API key (default $OPENAI_API_KEY)")


def make_client(base_url: str | None, model: str | None, api_key: str | None,
                timeout: float = LLM_TIMEOUT_S):
    from .llm.client import ChatClient
    return ChatClient(model=model, base_url=base_url, api_key=api_key, timeout=timeout)


# ------------------------------------------------------------------------ ask
def add_damaged_graph(s) -> None:
    """``--damaged-graph``: what opening the index does with a damaged usearch graph."""
    from .config import DAMAGED_GRAPHS, DEFAULT_DAMAGED_GRAPH
    s.add_argument("--damaged-graph", choices=DAMAGED_GRAPHS, default=DEFAULT_DAMAGED_GRAPH,
                   help="a usearch graph failing its checksum or structural check: 'error' "
                        "(default) stops with an index error; 'exact' searches that kind "
                        "exactly on its float32 vectors and prints a warning")


def add_ask_parser(sub, parents: Sequence[argparse.ArgumentParser], methods: Sequence[str],
                   func) -> None:
    s = sub.add_parser("ask", parents=list(parents),
                       help="answer a question from an index, with citations (JSON)")
    s.add_argument("index")
    s.add_argument("question")
    from .config import TUNED
    s.add_argument("--method", choices=sorted(methods), default=TUNED.method)
    s.add_argument("--top-k", type=int, default=TUNED.top_k)
    s.add_argument("--max-context-chars", type=int, default=12_000)
    s.add_argument("--temperature", type=float, default=0.0)
    s.add_argument("--timeout", type=float, default=LLM_TIMEOUT_S, help="seconds per request")
    s.add_argument("--stream", action="store_true",
                   help="use the streaming protocol (the reply is collected, then printed)")
    s.add_argument("--no-verify", action="store_true", help="skip checksums")
    add_damaged_graph(s)
    add_llm_args(s)
    s.set_defaults(func=func)


def cmd_ask(a, load) -> dict[str, Any]:
    """Retrieve with ``--method`` and answer; ``load(path, verify)`` gives the retriever."""
    from dataclasses import replace

    from .answer import answer
    client = make_client(a.base_url, a.model, a.api_key, a.timeout)
    r = load(a.index, not a.no_verify)  # its options: the preset of the index's embedder
    ans = answer(r, a.question, client, replace(r.options, method=a.method),
                 top_k=a.top_k, stream=a.stream, max_context_chars=a.max_context_chars,
                 temperature=a.temperature)
    return {"question": a.question, "method": a.method, **ans.to_dict()}


def print_ask(out: dict[str, Any]) -> None:
    print(out["answer"])
    how = "cited" if out["cited_explicitly"] else "no citations in the answer; passages shown"
    print(f"\n{how}:")
    for c in out["citations"] or [c for c in out["retrieval"]["chunks"]
                                  if c["chunk_id"] in set(out["chunks_used"])]:
        where = f"[{c['passage']}] " if "passage" in c else ""
        print(f"  {where}{c['title'] or c['doc_id']} ({c['doc_id']}, chars {c['start']}-{c['end']})")
    u = out["usage"] or {}
    print(f"model {out['model']}; tokens prompt {u.get('prompt_tokens', '?')}, "
          f"completion {u.get('completion_tokens', '?')}")


# ------------------------------------------------------------------------ eval
def add_eval_parser(sub) -> None:
    s = sub.add_parser("eval", add_help=False,
                       help="retrieval quality (python -m hyperrag_fast.eval); with --answers, "
                            "answer quality (hyperrag eval --answers --help)")
    s.add_argument("rest", nargs=argparse.REMAINDER)  # main() forwards before parsing


def run_eval(argv: Sequence[str], make_extractor) -> int:
    """Forward to the retrieval harness, or to :func:`answers_main` with ``--answers``."""
    argv = list(argv)
    if "--answers" in argv:
        argv.remove("--answers")
        return answers_main(argv, make_extractor)
    from .eval.__main__ import main as eval_main
    return eval_main(argv)


def answers_parser() -> argparse.ArgumentParser:
    from .config import TUNED
    from .eval.data import DATASETS
    p = argparse.ArgumentParser(prog="hyperrag eval --answers",
                                description="answer Contain-Acc / EM / F1 (and LLM-judge acc) "
                                            "of retrieval methods plus zero-shot")
    from .eval.gbench import SUBSETS
    p.add_argument("--dataset", choices=DATASETS + tuple(SUBSETS), required=True)
    p.add_argument("--split", choices=("dev", "test", "all"), default=None,
                   help="required except for GraphRAG-Bench (graphrag_bench_*)")
    p.add_argument("--methods", default=f"dense,{TUNED.method}", help="comma-separated method names")
    p.add_argument("--no-zero-shot", action="store_true", help="skip the zero_shot row")
    p.add_argument("--limit", type=int, default=None, help="first N questions of the split")
    p.add_argument("--top-k", type=int, default=None,
                   help=f"passages per answer (default: {TUNED.top_k}; GraphRAG-Bench: 5)")
    p.add_argument("--max-context-chars", type=int, default=12_000)
    p.add_argument("--concurrency", type=int, default=EVAL_LLM_CONCURRENCY, help="requests in flight")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--timeout", type=float, default=LLM_TIMEOUT_S, help="seconds per request")
    add_llm_args(p)
    p.add_argument("--judge-model", default=None, help="enables the LLM judge")
    p.add_argument("--judge-base-url", default=None, help="default: --base-url")
    p.add_argument("--judge-api-key", default=None, help="default: --api-key")
    p.add_argument("--extractor", choices=("offline", "regex"), default="offline")
    from .config import DEFAULT_EMBEDDER
    from .embed.registry import INDEX_KINDS
    p.add_argument("--embedder", choices=INDEX_KINDS, default=DEFAULT_EMBEDDER)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--index-dir", default=None, help="reuse/save the corpus index here")
    p.add_argument("--cache-dir", default="cache", help="embedding + answer cache directory")
    p.add_argument("--out-dir", required=True, help="folder the results are written to")
    p.add_argument("--quiet", action="store_true")
    return p


def answers_main(argv: Sequence[str], make_extractor) -> int:
    """Run :func:`~hyperrag_fast.eval.answers.evaluate_answers` and print the table."""
    from .config import TUNED
    from .embed.registry import make_embedder
    from .eval.answers import evaluate_answers
    from .llm.client import LLMError
    argv = list(argv)
    a = answers_parser().parse_args(argv)
    try:
        client = make_client(a.base_url, a.model, a.api_key, a.timeout)
        judge = None
        if a.judge_model:
            judge = make_client(a.judge_base_url or a.base_url, a.judge_model,
                                a.judge_api_key or a.api_key, a.timeout)
        from .eval.gbench import SUBSETS
        if a.dataset in SUBSETS:
            return _gbench_answers(a, client, judge, argv)
        if a.split is None:
            raise ValueError("--split is required for this dataset")
        out = evaluate_answers(
            a.dataset, a.split, [m.strip() for m in a.methods.split(",") if m.strip()],
            client, judge, data_dir=a.data_dir, index_dir=a.index_dir, cache_dir=a.cache_dir,
            out_dir=a.out_dir, top_k=a.top_k or TUNED.top_k, max_context_chars=a.max_context_chars,
            max_concurrency=a.concurrency, limit=a.limit, zero_shot=not a.no_zero_shot,
            temperature=a.temperature, progress=not a.quiet,
            extractor_factory=lambda: make_extractor(a.extractor),
            embedder_factory=lambda: make_embedder(a.embedder),
            command=" ".join(["hyperrag eval --answers", *_redact(argv)]))
    except (ValueError, FileNotFoundError, ImportError, LLMError) as e:
        print(f"hyperrag: error: {e}", file=sys.stderr)
        return 2
    for name, r in out["methods"].items():
        def f(v):
            return "   -" if v is None else f"{v:.3f}"
        judge_s = f"  judge {f(r['judge_acc'])}" if "judge_acc" in r else ""
        print(f"{name:>16}  Contain {f(r['contain_acc'])}  EM {f(r['em'])}  F1 {f(r['f1'])}"
              f"{judge_s}  answered {r['n_answered']}  skipped {r['n_skipped']}  "
              f"tokens {json.dumps(r['usage'])}")
    return 0


def _gbench_answers(a, client, judge, argv) -> int:
    """GraphRAG-Bench answer accuracy (statement F1, answer similarity) per method."""
    from .embed.registry import make_embedder
    from .eval.gbench_answers import evaluate_gbench_answers
    top_k = a.top_k or 5
    out = evaluate_gbench_answers(
        a.dataset, [m.strip() for m in a.methods.split(",") if m.strip()], client, judge,
        index_dir=a.index_dir, cache_dir=a.cache_dir, data_dir=a.data_dir, out_dir=a.out_dir,
        top_k=top_k, limit=a.limit, max_concurrency=a.concurrency, progress=not a.quiet,
        embedder_factory=lambda: make_embedder(a.embedder),
        command=" ".join(["hyperrag eval --answers", *_redact(argv)]))
    for name, r in out["methods"].items():
        f1, sim = r["statement_f1"]["all"], r["answer_similarity"]["all"]
        print(f"{name:>16}  statement F1 {f1 if f1 is None else round(f1, 3)}  "
              f"similarity {sim if sim is None else round(sim, 3)}")
    return 0


def _redact(argv: Sequence[str]) -> list[str]:
    """argv with API key values replaced, for the recorded command line."""
    out, hide = [], False
    for x in argv:
        out.append("***" if hide else x.split("=", 1)[0] + "=***" if "-api-key=" in x else x)
        hide = x in ("--api-key", "--judge-api-key")
    return out
