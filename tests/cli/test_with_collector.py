"""The `deniable` command against a real collector (`deniable serve` on loopback, real HTTP)."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import httpx
import polars as pl
import pytest
from scipy.stats import norm

from deniable.cli.localcollector import LocalCollector
from deniable.client import MetricSpec
from testkit.cli import run_cli as run
from testkit.cli import simulated_truths

BROWSERS = ["chrome", "safari", "edge", "firefox"]
DEVICES = 3000


INGEST_KEY = "cli-test-ingest-key"


@pytest.fixture(scope="module")
def collector() -> Iterator[LocalCollector]:
    with LocalCollector(ingest_key=INGEST_KEY) as running:
        yield running


@pytest.fixture(scope="module")
def populated(collector: LocalCollector) -> dict[str, dict[str, float]]:
    """Two metrics registered through the CLI, each reported by DEVICES simulated devices today."""
    admin = ("--collector", collector.url, "--token", collector.token)
    created = run(*admin, "metrics", "create", "dark_mode", "--boolean", "--epsilon", "1")
    assert created.exit_code == 0, created.output
    created = run(
        *admin, "metrics", "create", "browser", "--categories", ",".join(BROWSERS), "--epsilon", "2"
    )
    assert created.exit_code == 0, created.output
    return simulated_truths(admin, {"dark_mode": 11, "browser": 12}, DEVICES)


def admin(collector: LocalCollector) -> tuple[str, ...]:
    return ("--collector", collector.url, "--token", collector.token)


def one_line_error(result: click.testing.Result, code: int = 1) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    message = result.stderr.strip()
    assert message.startswith("error: ") and "\n" not in message and "Traceback" not in message, (
        message
    )
    return message


def today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def test_create_shows_the_resolved_spec_and_its_fingerprint(
    collector: LocalCollector, populated: dict
) -> None:
    result = run(*admin(collector), "metrics", "show", "browser", "--format", "json")
    assert result.exit_code == 0, result.output
    spec = json.loads(result.stdout)
    local = MetricSpec.categorical("browser", BROWSERS, epsilon=2.0)
    assert spec["mechanism"] == local.mechanism != "auto"
    assert spec["fingerprint"] == local.fingerprint
    table = run("--collector", collector.url, "metrics", "show", "dark_mode")
    assert table.exit_code == 0, table.output
    for text in (
        "brr",
        MetricSpec.boolean("dark_mode", epsilon=1.0).fingerprint,
        "1,000",
        "10,000",
        "100,000",
    ):
        assert text in table.stdout


def test_show_margins_follow_the_brr_formula(collector: LocalCollector, populated: dict) -> None:
    """STATS.md section 1's Wilson interval at the worst count n/2, mapped through
    tanh(eps/2): z sqrt(n/4 + z^2/4) / ((n + z^2) tanh(eps/2)), per category and for both
    at once (Bonferroni)."""
    result = run("--collector", collector.url, "metrics", "show", "dark_mode", "--format", "json")
    rows = json.loads(result.stdout)["expected_margin"]["by_reports"]
    for row in rows:
        n = row["reports"]
        for key, z in (("margin", norm.isf(0.025)), ("simultaneous_margin", norm.isf(0.0125))):
            wilson = z * math.sqrt(n / 4 + z * z / 4) / ((n + z * z) * math.tanh(0.5))
            assert row[key] == pytest.approx(wilson, rel=1e-9)


def test_list_in_every_format(collector: LocalCollector, populated: dict) -> None:
    table = run("--collector", collector.url, "metrics", "list")
    assert "browser" in table.stdout and "dark_mode" in table.stdout
    listed = json.loads(
        run("--collector", collector.url, "metrics", "list", "--format", "json").stdout
    )
    assert {"browser", "dark_mode"} <= {m["name"] for m in listed}
    csv_lines = run(
        "--collector", collector.url, "metrics", "list", "--format", "csv"
    ).stdout.splitlines()
    assert csv_lines[0].startswith("name,type,categories") and len(csv_lines) == len(listed) + 1


def test_create_conflict_and_bad_spec(collector: LocalCollector, populated: dict) -> None:
    conflict = run(
        *admin(collector), "metrics", "create", "browser", "--categories", "a,b,c", "--epsilon", "1"
    )
    assert "409" in one_line_error(conflict)
    two = run(
        *admin(collector),
        "metrics",
        "create",
        "coin",
        "--categories",
        "heads,tails",
        "--epsilon",
        "1",
    )
    assert two.exit_code == 0, two.output
    assert "krr" in two.stdout
    assert "needs at least 2 categories" in one_line_error(
        run(
            *admin(collector), "metrics", "create", "solo", "--categories", "only", "--epsilon", "1"
        )
    )
    assert run(*admin(collector), "metrics", "create", "x", "--epsilon", "1").exit_code == 2


def test_estimate_json_is_exactly_the_api_document_and_covers_the_truth(
    collector: LocalCollector, populated: dict
) -> None:
    for name in ("dark_mode", "browser"):
        args = (
            "estimate",
            name,
            "--start",
            today(),
            "--end",
            today(),
            "--simultaneous",
            "--confidence",
            "0.999",
            "--method",
            "unbiased",
        )
        result = run(*admin(collector), *args, "--format", "json")
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        direct = httpx.get(
            f"{collector.url}/v1/metrics/{name}/estimate",
            params={
                "start": today(),
                "end": today(),
                "simultaneous": "true",
                "confidence": 0.999,
                "method": "unbiased",
                "pooling": "overlap-safe",
            },
            headers={"Authorization": f"Bearer {collector.token}"},
        ).json()
        assert document == direct
        assert document["n"] == DEVICES and document["periods"] == 1
        for row in document["estimates"]:
            assert row["ci_low"] <= populated[name][row["category"]] <= row["ci_high"], (name, row)


def test_estimate_table_and_csv(collector: LocalCollector, populated: dict) -> None:
    result = run(*admin(collector), "estimate", "browser")
    assert result.exit_code == 0, result.output
    rows = [ln for ln in result.stdout.splitlines() if ln.startswith("│")]
    shares = [float(ln.split("│")[2].strip().rstrip("%")) for ln in rows]
    assert len(rows) == len(BROWSERS) and shares == sorted(shares, reverse=True)
    assert "pooling overlap-safe" in result.stdout and "3,000 reports · " in result.stdout
    csv_lines = run(*admin(collector), "estimate", "browser", "--format", "csv").stdout.splitlines()
    column = csv_lines[0].split(",").index("category")
    assert [line.split(",")[column] for line in csv_lines[1:]] == BROWSERS


def test_estimate_pooling_method_and_range(collector: LocalCollector, populated: dict) -> None:
    start = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=6)).isoformat()
    result = run(
        *admin(collector),
        "estimate",
        "dark_mode",
        "--start",
        start,
        "--pooling",
        "independent",
        "--method",
        "consistent",
        "--format",
        "json",
    )
    document = json.loads(result.stdout)
    assert (document["pooling"], document["method"], document["start"]) == (
        "independent",
        "consistent",
        start,
    )
    assert document["n"] == DEVICES and document["periods"] == 1
    assert abs(sum(r["frequency"] for r in document["estimates"]) - 1) < 1e-9


def test_last_n_days(collector: LocalCollector, populated: dict) -> None:
    document = json.loads(
        run(*admin(collector), "estimate", "dark_mode", "--last", "7", "--format", "json").stdout
    )
    week_ago = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=6)).isoformat()
    assert (document["start"], document["end"], document["n"]) == (week_ago, today(), DEVICES)
    series = json.loads(
        run(*admin(collector), "series", "browser", "--last", "2", "--format", "json").stdout
    )
    assert [p["n"] for p in series["series"]] == [0, DEVICES]


def test_series_chart_json_and_csv(collector: LocalCollector, populated: dict) -> None:
    start = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=2)).isoformat()
    chart = run(*admin(collector), "series", "dark_mode", "--start", start)
    assert chart.exit_code == 0, chart.output
    rows = [ln for ln in chart.stdout.splitlines() if ln.startswith("│")]
    assert len(rows) == 3 and rows[-1].split("│")[1].strip() == today()
    assert "●" in rows[-1] and "no reports" in rows[0]
    document = json.loads(
        run(*admin(collector), "series", "browser", "--start", start, "--format", "json").stdout
    )
    assert [p["n"] for p in document["series"]] == [0, 0, DEVICES]
    csv_lines = run(
        *admin(collector),
        "series",
        "browser",
        "--start",
        start,
        "--category",
        "edge",
        "--format",
        "csv",
    ).stdout.splitlines()
    assert csv_lines[0] == (
        "metric,period,reports,method,confidence,simultaneous,"
        "category,frequency,std_error,ci_low,ci_high,estimated_reports,unbiased,clipped"
    )
    assert [line.split(",")[6] for line in csv_lines[1:]] == ["edge"] * 3
    assert [line.split(",")[0] for line in csv_lines[1:]] == ["browser"] * 3
    picked = run(*admin(collector), "series", "browser", "--category", "safari")
    assert "safari" in picked.stdout and "chrome" not in picked.stdout


@pytest.mark.parametrize("via", ["http", "database"])
def test_export_then_offline_estimate_agrees_with_the_collector(
    collector: LocalCollector, populated: dict, tmp_path: Path, via: str
) -> None:
    """Raw reports exported (by the admin API or from the database), re-estimated offline: the
    same numbers as the collector's counts."""
    online = json.loads(run(*admin(collector), "estimate", "browser", "--format", "json").stdout)
    source = ("--database", collector.database_url) if via == "database" else ()
    for fmt in ("parquet", "csv"):
        out = tmp_path / f"browser.{fmt}"
        result = run(
            *admin(collector), "export", "browser", "--format", fmt, "--output", str(out), *source
        )
        assert result.exit_code == 0, result.output
        assert f"wrote {online['n']:,} randomized report(s) of browser" in result.stderr
    offline = json.loads(
        run(
            "estimate",
            "browser",
            "--from-file",
            str(tmp_path / "browser.parquet"),
            "--format",
            "json",
        ).stdout
    )
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(
        run("--collector", collector.url, "metrics", "show", "browser", "--format", "json").stdout
    )
    from_csv = json.loads(
        run(
            "estimate",
            "browser",
            "--from-file",
            str(tmp_path / "browser.csv"),
            "--spec",
            str(spec_file),
            "--format",
            "json",
        ).stdout
    )
    for document in (offline, from_csv):
        assert document["n"] == online["n"] == DEVICES
        for mine, theirs in zip(document["estimates"], online["estimates"], strict=True):
            assert mine["category"] == theirs["category"]
            for key in ("frequency", "ci_low", "ci_high"):
                assert mine[key] == pytest.approx(theirs[key], abs=1e-12)


def test_export_format_follows_the_extension_unless_given(
    collector: LocalCollector, populated: dict, tmp_path: Path
) -> None:
    """-o x.csv writes CSV, -o x.parquet (or an unknown extension) Parquet; a contradiction is
    a usage error that writes nothing."""
    for name, magic in (("x.csv", b"id,metric,"), ("x.PARQUET", b"PAR1"), ("x.dat", b"PAR1")):
        out = tmp_path / name
        result = run(*admin(collector), "export", "dark_mode", "-o", str(out))
        assert result.exit_code == 0, result.output
        assert out.read_bytes().startswith(magic), name
    explicit = tmp_path / "explicit.dat"
    result = run(*admin(collector), "export", "dark_mode", "--format", "csv", "-o", str(explicit))
    assert result.exit_code == 0, result.output
    assert explicit.read_bytes().startswith(b"id,metric,")
    for fmt, name in (("csv", "y.parquet"), ("parquet", "y.csv")):
        out = tmp_path / name
        result = run(*admin(collector), "export", "dark_mode", "--format", fmt, "-o", str(out))
        assert result.exit_code == 2, result.output
        assert f"Error: --format {fmt} does not match the extension of {name};" in result.stderr
        assert "Traceback" not in result.output and not out.exists()


def test_retention(collector: LocalCollector, populated: dict) -> None:
    result = run(*admin(collector), "retention", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["deleted"] == 0
    assert (
        "deleted 0 raw report(s)"
        in run(*admin(collector), "retention", "--before", "2020-01-01").stdout
    )
    assert "before must be on or before" in one_line_error(
        run(*admin(collector), "retention", "--before", today())
    )


def test_error_paths(collector: LocalCollector, populated: dict) -> None:
    url = ("--collector", collector.url)
    assert "unknown metric 'nope'" in one_line_error(run(*admin(collector), "estimate", "nope"))
    assert "unknown metric 'nope'" in one_line_error(run(*url, "metrics", "show", "nope"))
    assert "refused the token" in one_line_error(
        run(*url, "--token", "wrong", "estimate", "browser")
    )
    assert "requires a token" in one_line_error(run(*url, "series", "browser"))
    assert "start" in one_line_error(
        run(*admin(collector), "estimate", "browser", "--start", "2026-W01")
    )
    late = (dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)).isoformat()
    assert "after end" in one_line_error(
        run(*admin(collector), "estimate", "browser", "--start", late, "--end", today())
    )
    assert run(*admin(collector), "estimate", "browser", "--end", "2026-99-99").exit_code == 2
    exported = run(
        *admin(collector),
        "export",
        "nope",
        "-o",
        "never.parquet",
        "--database",
        collector.database_url,
    )
    assert "unknown metric 'nope'" in one_line_error(exported)
    over_http = run(*admin(collector), "export", "nope", "-o", "never.parquet")
    assert "unknown metric 'nope'" in one_line_error(over_http)
    assert "requires a token" in one_line_error(
        run(*url, "export", "browser", "-o", "never.parquet")
    )
    assert "refused the token" in one_line_error(
        run(*url, "--token", "wrong", "export", "browser", "-o", "never.parquet")
    )
    assert not Path("never.parquet").exists()


def test_simulate_needs_the_ingest_key_or_the_admin_token(
    collector: LocalCollector, populated: dict
) -> None:
    created = run(*admin(collector), "metrics", "create", "probe", "--boolean", "--epsilon", "1")
    assert created.exit_code == 0, created.output
    plain = ("--collector", collector.url, "simulate", "--metric", "probe", "--clients", "50")
    assert "refused 50 report(s)" in one_line_error(run(*plain))
    assert run(*plain, "--ingest-key", INGEST_KEY).exit_code == 0
    assert "refused" in one_line_error(run(*plain, "--ingest-key", "wrong"))


def test_simulate_from_a_distribution_file(
    collector: LocalCollector, populated: dict, tmp_path: Path
) -> None:
    shares = tmp_path / "shares.csv"
    shares.write_text("category,weight\nchrome,3\nsafari,1\n")
    result = run(
        *admin(collector),
        "simulate",
        "--metric",
        "browser",
        "--clients",
        "400",
        "--distribution",
        str(shares),
        "--seed",
        "3",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["truth"] == {
        "chrome": 0.75,
        "safari": 0.25,
        "edge": 0.0,
        "firefox": 0.0,
    }
    shares.write_text("opera,1\n")
    assert "not a category" in one_line_error(
        run(
            *admin(collector),
            "simulate",
            "--metric",
            "browser",
            "--clients",
            "5",
            "--distribution",
            str(shares),
        )
    )
    assert (
        run(
            *admin(collector),
            "simulate",
            "--metric",
            "browser",
            "--clients",
            "5",
            "--distribution",
            "nofile",
        ).exit_code
        == 2
    )


def subprocess_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}


def test_through_a_real_process(collector: LocalCollector, populated: dict) -> None:
    env = {
        **subprocess_env(),
        "DENIABLE_COLLECTOR_URL": collector.url,
        "DENIABLE_ADMIN_TOKEN": collector.token,
    }
    out = subprocess.run(
        [sys.executable, "-m", "deniable.cli.main", "estimate", "dark_mode", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["n"] == DEVICES
    refused = subprocess.run(
        [sys.executable, "-m", "deniable.cli.main", "--token", "wrong", "estimate", "dark_mode"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "refused the token" in refused.stderr


def test_serve_refuses_a_public_address_without_a_token() -> None:
    """By flag and by the environment variable that mirrors it."""
    flag = [sys.executable, "-m", "deniable.cli.main", "serve", "--host", "0.0.0.0", "--port", "1"]
    env = {**subprocess_env(), "DENIABLE_DATABASE_URL": "sqlite:///:memory:"}
    by_env = {**env, "DENIABLE_HOST": "0.0.0.0", "DENIABLE_PORT": "1"}
    for command, environment in ((flag, env), (flag[:4], by_env)):
        out = subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment)
        assert out.returncode == 1, out.stderr
        assert out.stderr.count("\n") == 1 and "refusing to listen on 0.0.0.0" in out.stderr


@pytest.mark.parametrize("mechanism", ["oue", "olh"])
def test_export_from_postgresql_round_trips(databases, mechanism: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """On PostgreSQL, with the unary and hashing payloads: export, then estimate offline."""
    url = databases.new("postgresql")
    tags = ",".join(f"t{i}" for i in range(12))
    with LocalCollector(url) as running:
        args = admin(running)
        created = run(
            *args,
            "metrics",
            "create",
            "tags",
            "--categories",
            tags,
            "--epsilon",
            "1",
            "--mechanism",
            mechanism,
            "--accept-weak",
        )
        assert created.exit_code == 0, created.output
        simulated = run(
            *args,
            "simulate",
            "--metric",
            "tags",
            "--clients",
            "1500",
            "--seed",
            "4",
            "--format",
            "json",
        )
        assert simulated.exit_code == 0, simulated.output
        out = tmp_path / "tags.parquet"
        exported = run(*args, "export", "tags", "--output", str(out), "--database", url)
        assert exported.exit_code == 0, exported.output
        over_http = tmp_path / "tags-http.parquet"
        exported = run(*args, "export", "tags", "--output", str(over_http))
        assert exported.exit_code == 0, exported.output
        online = json.loads(
            run(*args, "estimate", "tags", "--method", "consistent", "--format", "json").stdout
        )
    frame = pl.read_parquet(out)
    assert frame.height == 1500 and frame["id"].n_unique() == 1500
    assert frame.equals(pl.read_parquet(over_http))
    assert pl.read_parquet_schema(over_http) == pl.read_parquet_schema(out)
    assert set(frame.columns) >= ({"a", "b", "y"} if mechanism == "olh" else {"payload"})
    offline = json.loads(
        run(
            "estimate",
            "tags",
            "--from-file",
            str(out),
            "--method",
            "consistent",
            "--format",
            "json",
        ).stdout
    )
    for mine, theirs in zip(offline["estimates"], online["estimates"], strict=True):
        for key in ("frequency", "ci_low", "ci_high"):
            assert mine[key] == pytest.approx(theirs[key], abs=1e-12)


def test_series_simultaneous_online_and_offline(
    collector: LocalCollector, populated: dict, tmp_path: Path
) -> None:
    """--simultaneous: each period is that period's simultaneous estimate, online and from a file."""
    start = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)).isoformat()
    window = ("--start", start, "--end", today(), "--format", "json")
    joint = json.loads(
        run(*admin(collector), "series", "browser", "--simultaneous", *window).stdout
    )
    single = json.loads(
        run(*admin(collector), "series", "browser", "--per-category", *window).stdout
    )
    estimate = json.loads(
        run(
            *admin(collector),
            "estimate",
            "browser",
            "--simultaneous",
            "--start",
            today(),
            "--end",
            today(),
            "--format",
            "json",
        ).stdout
    )
    assert [p["n"] for p in joint["series"]] == [0, estimate["n"]] and estimate["n"] >= DEVICES
    assert joint["series"][1]["estimates"] == estimate["estimates"]
    for wide, narrow in zip(
        joint["series"][1]["estimates"], single["series"][1]["estimates"], strict=True
    ):
        assert wide["frequency"] == narrow["frequency"]
        assert wide["ci_low"] <= narrow["ci_low"] and wide["ci_high"] >= narrow["ci_high"]
        assert wide["ci_high"] - wide["ci_low"] > narrow["ci_high"] - narrow["ci_low"]
    out = tmp_path / "browser.parquet"
    assert run(*admin(collector), "export", "browser", "-o", str(out)).exit_code == 0
    offline = json.loads(
        run("series", "browser", "--simultaneous", "--from-file", str(out), *window).stdout
    )
    assert [p["n"] for p in offline["series"]] == [0, estimate["n"]]
    for mine, theirs in zip(
        offline["series"][1]["estimates"], joint["series"][1]["estimates"], strict=True
    ):
        for key in ("frequency", "ci_low", "ci_high"):
            assert mine[key] == pytest.approx(theirs[key], abs=1e-12)


def test_simulate_takes_a_json_object_inline_or_in_a_file(
    collector: LocalCollector, populated: dict, tmp_path: Path
) -> None:
    """Issue 25: the help said "a JSON object" but only a file worked."""
    inline = '{"chrome": 1, "edge": 3}'
    saved = tmp_path / "shares.json"
    saved.write_text(inline)
    for given in (inline, str(saved)):
        result = run(*admin(collector), "simulate", "--metric", "browser", "--clients", "40",
                     "--distribution", given, "--seed", "3", "--format", "json")  # fmt: skip
        assert result.exit_code == 0, result.output
        truth = json.loads(result.stdout)["truth"]
        assert truth == {"chrome": 0.25, "edge": 0.75, "firefox": 0.0, "safari": 0.0}
    for bad, says in (
        ('{"opera": 1}', "'opera', which is not a category"),
        ('{"chrome": "lots"}', "is not a distribution"),
        ('{"chrome": -1, "edge": 2}', "non-negative"),
    ):
        refused = run(*admin(collector), "simulate", "--metric", "browser", "--clients", "5",
                      "--distribution", bad)  # fmt: skip
        assert says in one_line_error(refused), bad
