"""The dashboard's chart and selection helpers, on their own (no collector needed)."""

from __future__ import annotations

from deniable.client import MetricSpec
from deniable.collector.dashboard.charts import Point, fit_text, runs, text_width
from deniable.collector.dashboard.data import shown_categories
from deniable.collector.dashboard.kindviews import MAX_TOP


def estimate_of(spec: MetricSpec, shares: list[float]) -> dict[str, object]:
    """An estimate document's rows with ``shares`` (the fields the selection reads)."""
    return {
        "estimates": [
            {"category": c, "frequency": f} for c, f in zip(spec.categories, shares, strict=True)
        ]
    }


def test_a_histogram_draws_every_bucket_in_order_up_to_the_limit_then_its_largest() -> None:
    small = MetricSpec.histogram("small_hist", list(range(7)), epsilon=1.0)
    shares = [0.3, 0.01, 0.2, 0.02, 0.4, 0.07]
    assert shown_categories(small, estimate_of(small, shares), 5) == list(small.categories)
    edges = list(range(MAX_TOP + 6))
    large = MetricSpec.histogram("large_hist", edges, epsilon=1.0)
    many = [0.01] * large.k
    many[3], many[0], many[20] = 0.3, 0.2, 0.25
    assert shown_categories(large, estimate_of(large, many), 3) == [
        large.categories[0],
        large.categories[3],
        large.categories[20],
    ]


def test_a_boolean_draws_its_true_share_and_a_categorical_its_largest() -> None:
    flag = MetricSpec.boolean("flag", epsilon=1.0)
    assert shown_categories(flag, estimate_of(flag, [0.7, 0.3]), 5) == ["true"]
    colors = MetricSpec.categorical("colors", ["red", "green", "blue"], epsilon=1.0)
    assert shown_categories(colors, estimate_of(colors, [0.2, 0.5, 0.3]), 2) == ["green", "blue"]


def test_a_label_is_fitted_to_its_room_with_an_ellipsis_at_the_end() -> None:
    label = "Chrome 131 on Windows 11 (64-bit) with a very long suffix"
    short = fit_text(label, 12, 150)
    assert short.endswith("…") and label.startswith(short[:-1].rstrip())
    assert text_width(short, 12) <= 150
    assert fit_text("Other", 12, 150) == "Other"


def test_a_band_never_bridges_a_period_without_reports() -> None:
    periods = ["d1", "d2", "d3", "d4", "d5"]
    index = {p: i for i, p in enumerate(periods)}
    values = [0.1, 0.2, None, 0.3, None]
    points = [Point(p, v, 0.0, 1.0) for p, v in zip(periods, values, strict=True)]
    assert [[p.period for p in run] for run in runs(points, index)] == [["d1", "d2"], ["d4"]]
