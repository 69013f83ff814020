"""How the product's metric names read in Prometheus (the collector's translation rules)."""

import pytest

from yeto_otel.census import CENSUS, CENSUS_ERRORS
from yeto_otel.names import (EXIT_INFO, EXITS_COUNTER, exit_metric_names, exported_metric_names,
                             prometheus_label, prometheus_name)
from yeto_otel.names import LOAD_MODE_ATTRIBUTE, RESUME_METRICS


@pytest.mark.parametrize("otel, unit, counter, expected", [
    ("yeto.process.memory.rss", "By", False, "yeto_process_memory_rss_bytes"),
    # the semantic conventions' names, as the remote-write exporter writes them
    ("process.memory.usage", "By", False, "process_memory_usage_bytes"),
    ("process.memory.virtual", "By", False, "process_memory_virtual_bytes"),
    ("yeto.census.errors", "{error}", True, "yeto_census_errors_total"),
    # the memory cgroup's: events and pressure are counters, pressure in seconds
    ("yeto.cgroup.memory.working_set", "By", False, "yeto_cgroup_memory_working_set_bytes"),
    ("yeto.cgroup.memory.events", "{event}", True, "yeto_cgroup_memory_events_total"),
    ("yeto.cgroup.memory.pressure", "s", True, "yeto_cgroup_memory_pressure_seconds_total"),
    ("yeto.cgroup.memory.info", "{cgroup}", False, "yeto_cgroup_memory_info"),
    # a `bytes` token already in the name: no second suffix
    ("yeto.host_allocator.allocated_bytes.current", "By", False,
     "yeto_host_allocator_allocated_bytes_current"),
    ("yeto.host_allocator.allocated_bytes.freed", "By", True,
     "yeto_host_allocator_allocated_bytes_freed_total"),
    ("yeto.host_allocator.allocations.peak", "{allocation}", False,
     "yeto_host_allocator_allocations_peak"),
    ("requests.total.count", "1", True, "requests_count_total"),
    ("cache.hit", "1", False, "cache_hit_ratio"),
    ("io.rate", "By/s", False, "io_rate_bytes_per_second"),
    ("x..y__z", "ms", False, "x_y_z_milliseconds"),
    ("2xx.responses", "", True, "_2xx_responses_total"),
])
def test_translation_rules(otel, unit, counter, expected):
    assert prometheus_name(otel, unit, monotonic_counter=counter) == expected


def test_every_exported_metric_has_one_distinct_name():
    names = exported_metric_names()
    exits = exit_metric_names()
    assert len(names) == len(CENSUS) + 1 + len(RESUME_METRICS) + len(exits)
    assert set(names.values()) == {m.name for m in (*CENSUS, CENSUS_ERRORS, *RESUME_METRICS)} \
        | {EXITS_COUNTER, EXIT_INFO}
    assert exits == {"yeto_rank_exits_total": EXITS_COUNTER, "yeto_rank_exit_info": EXIT_INFO}
    assert names["yeto_node_memory_anon_pages_bytes"] == "yeto.node.memory.anon_pages"
    assert names["yeto_resume_anchors_bytes_mapped"] == "yeto.resume.anchors.bytes_mapped"
    assert names["process_memory_usage_bytes"] == "process.memory.usage"
    assert names["process_memory_virtual_bytes"] == "process.memory.virtual"
    # running totals are the only `_total` names
    totals = {n for n in names if n.endswith("_total")}
    assert totals == {n for n, otel in names.items()
                      if otel == CENSUS_ERRORS.name or otel.endswith((".allocated", ".freed"))
                      or otel.endswith(("num_host_alloc", "num_host_free"))
                      or otel in ("yeto.cgroup.memory.events", "yeto.cgroup.memory.pressure",
                                  EXITS_COUNTER)}
    assert names["yeto_cgroup_memory_limit_bytes"] == "yeto.cgroup.memory.limit"
    assert names["yeto_cgroup_memory_peak_bytes"] == "yeto.cgroup.memory.peak"


@pytest.mark.parametrize("attribute, label", [
    ("host.name", "host_name"),
    ("yeto.rank", "yeto_rank"),
    ("yeto.local_rank", "yeto_local_rank"),
    ("service.instance.id", "service_instance_id"),
    ("source", "source"),
    ("event", "event"),
    ("level", "level"),
    ("yeto.cgroup.path", "yeto_cgroup_path"),
    ("a-b/c d", "a_b_c_d"),
    ("2xx.code", "key_2xx_code"),
])
def test_attribute_labels(attribute, label):
    assert prometheus_label(attribute) == label


def test_the_load_mode_attribute_is_a_label_of_the_resume_metrics():
    assert prometheus_label(LOAD_MODE_ATTRIBUTE) == "yeto_anchors_load_mode"
