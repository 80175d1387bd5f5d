"""Prometheus metrics of one server (docs/architecture.md §11), on a registry of its own
(two servers in one process, e.g. tests, never share series). ``endpoint`` is the route
template, ``method`` the retrieval method ("" for routes that run none)."""
from __future__ import annotations

from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge,
                               Histogram, generate_latest)

#: latency buckets (seconds): dense where the targets are (5-100 ms)
BUCKETS = (.002, .004, .006, .008, .01, .0125, .015, .02, .025, .03, .04, .05, .075, .1,
           .15, .25, .5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """Every series the server exports; ``render()`` is the /metrics body."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("hyperrag_requests_total", "HTTP requests answered",
                                ["endpoint", "method", "status"], registry=r)
        self.errors = Counter("hyperrag_errors_total", "requests answered with an error, by kind "
                              "(bad_request, not_found, not_ready, shed, timeout, upstream, internal)",
                              ["endpoint", "kind"], registry=r)
        self.latency = Histogram("hyperrag_request_seconds", "end-to-end request latency in the "
                                 "server", ["endpoint", "method"], buckets=BUCKETS, registry=r)
        self.queries = Counter("hyperrag_queries_total", "questions answered (a batch counts "
                               "each)", ["index", "method"], registry=r)
        self.queue_depth = Gauge("hyperrag_queue_depth", "requests admitted and waiting for a "
                                 "worker", ["pool"], registry=r)
        self.in_flight = Gauge("hyperrag_in_flight", "requests admitted (queued + running)",
                               ["pool"], registry=r)
        self.capacity = Gauge("hyperrag_pool_capacity", "admission bound (workers + queue)",
                              ["pool"], registry=r)
        self.ready = Gauge("hyperrag_ready", "1 once every index is loaded and warmed", registry=r)
        self.generation = Gauge("hyperrag_generation", "the generation an index serves (value: "
                                "its sequence number)", ["index", "generation"], registry=r)
        self.switches = Counter("hyperrag_generation_switches_total", "new generations switched "
                                "to", ["index"], registry=r)
        self.switch_seconds = Histogram("hyperrag_generation_switch_seconds", "open + validate + "
                                        "warm of a new generation", ["index"],
                                        buckets=(.1, .25, .5, 1, 2, 5, 10, 30), registry=r)
        self.failures = Counter("hyperrag_generation_failures_total", "new generations rejected "
                                "(damaged or failing validation); the old one keeps serving",
                                ["index"], registry=r)
        self.failed = Gauge("hyperrag_generation_failed", "1 for the last rejected generation",
                            ["index", "generation"], registry=r)
        self.released = Counter("hyperrag_generations_released_total", "old generations "
                                "released after their last in-flight request", ["index"],
                                registry=r)
        self._last_failed: dict[str, str] = {}

    def watch_pool(self, name: str, pool) -> None:
        """Queue depth and in-flight counts read from ``pool`` at each scrape."""
        self.queue_depth.labels(name).set_function(lambda: pool.queued)
        self.in_flight.labels(name).set_function(lambda: pool.admitted)
        self.capacity.labels(name).set(pool.capacity)

    def serving(self, index: str, generation: str, previous: str | None) -> None:
        if previous is not None:
            self.generation.remove(index, previous)
        self.generation.labels(index, generation).set(_seq(generation))

    def rejected(self, index: str, generation: str) -> None:
        self.failures.labels(index).inc()
        last = self._last_failed.pop(index, None)
        if last is not None:
            self.failed.remove(index, last)
        self._last_failed[index] = generation
        self.failed.labels(index, generation).set(1)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _seq(generation: str) -> float:
    """gen-000012-ab12cd34 -> 12 (0 for an unnamed, pre-generation index)."""
    parts = generation.split("-")
    return float(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 0.0

