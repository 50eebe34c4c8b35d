"""A ``prometheus_client`` collector of lagless consumers' and producers' metrics.

>>> from prometheus_client import REGISTRY, start_http_server
>>> from lagless.prometheus import ConsumerCollector
>>> REGISTRY.register(ConsumerCollector(consumer))
>>> start_http_server(8000)

Each scrape takes a new snapshot of each consumer (``Consumer.metrics_prometheus()``: the
Prometheus text the Rust core renders) and hands its metric families, as
``prometheus_client.parser`` reads them, to the registry: ``lagless_consumer_*`` metrics
labelled with ``client_id``, ``group_id`` (group members) and, per partition, ``topic`` and
``partition`` (README.md, "Metrics", maps each to its field of ``Consumer.metrics()``).

A producer goes in the same way, ``ConsumerCollector(consumer, producer)``
(``Producer.metrics_prometheus()``: ``lagless_producer_*`` metrics labelled with ``client_id``
and, for a transactional producer, ``transactional_id``).

Several consumers go in one collector, ``ConsumerCollector(c1, c2)``, each with its own
``client.id``: their samples are merged into one family per metric. Two collectors of lagless
consumers in one registry would name the same families twice, which the default registry
refuses when the second is registered.

``prometheus_client`` is an optional dependency of lagless: ``pip install prometheus-client``
(or ``pip install lagless[prometheus]``).
"""

from __future__ import annotations

from typing import Dict, Iterator, Protocol

try:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.parser import text_string_to_metric_families
    from prometheus_client.registry import Collector
except ImportError:  # tests/test_prometheus.py imports the module without prometheus_client
    raise ImportError(
        "lagless.prometheus needs the prometheus_client package: pip install prometheus-client"
    ) from None

__all__ = ["ConsumerCollector"]


class _Metered(Protocol):
    """What the collector reads: ``lagless.Consumer`` and ``lagless.Producer`` are."""

    def metrics_prometheus(self) -> str: ...


class ConsumerCollector(Collector):
    """Collects the metrics of one or more lagless consumers and producers on each scrape."""

    def __init__(self, consumer: _Metered, *more: _Metered) -> None:
        self._consumers = (consumer, *more)

    def collect(self) -> Iterator[Metric]:
        families: Dict[str, Metric] = {}
        for consumer in self._consumers:
            for family in text_string_to_metric_families(consumer.metrics_prometheus()):
                have = families.get(family.name)
                if have is None:
                    families[family.name] = family
                else:
                    have.samples.extend(family.samples)
        yield from families.values()
