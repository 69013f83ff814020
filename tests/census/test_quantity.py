import pytest

from yeto_otel.census import Kind, Quantity

GIB = 1 << 30


def q(name, value, kind, unit="By"):
    return Quantity(name, value, kind, unit)


def test_the_old_release_callback_arithmetic_is_refused():
    # allocated_bytes.current is a gauge (28 GiB held); active_bytes.current on the affected
    # build is a running total that grew 0.155 GiB per step for 90 steps.
    held = q("allocated_bytes.current", 28 * GIB, Kind.GAUGE)
    active = q("active_bytes.current", int(28 * GIB + 90 * 0.155 * GIB), Kind.RUNNING_TOTAL)
    with pytest.raises(TypeError) as err:
        held - active
    message = str(err.value)
    assert "active_bytes.current is a running total" in message
    assert "gauge" in message and "negative" in message
    with pytest.raises(TypeError):
        active - held
    with pytest.raises(TypeError):
        held + active
    with pytest.raises(TypeError):
        held > active


def test_gauges_combine():
    held = q("held", 10, Kind.GAUGE)
    active = q("active", 4, Kind.GAUGE)
    idle = held - active
    assert idle.value == 6 and idle.kind is Kind.GAUGE
    assert (held + active).value == 14


def test_peak_minus_current_is_headroom_gauge():
    peak = q("peak", 10, Kind.HIGH_WATER_MARK)
    now = q("now", 7, Kind.GAUGE)
    assert (peak - now).kind is Kind.GAUGE
    assert (peak - now).value == 3


def test_running_totals_combine_into_a_running_total():
    allocated = q("allocated", 100, Kind.RUNNING_TOTAL)
    freed = q("freed", 30, Kind.RUNNING_TOTAL)
    assert (allocated - freed).kind is Kind.RUNNING_TOTAL
    assert (allocated - freed).value == 70


def test_units_must_match():
    with pytest.raises(TypeError, match="units differ"):
        q("a", 1, Kind.GAUGE, "By") - q("b", 1, Kind.GAUGE, "{allocation}")


def test_numbers_and_thresholds():
    held = q("held", 10, Kind.GAUGE)
    assert (held - 3).value == 7 and (held - 3).kind is Kind.GAUGE
    assert held > 5 and held >= 10 and held < 11 and held <= 10
    assert int(held) == 10 and float(held) == 10.0
    total = q("total", 10, Kind.RUNNING_TOTAL)
    assert total > 5  # a threshold is not a gauge: comparing is fine
    with pytest.raises(TypeError):
        held < "x"
