"""The length study: per-bucket and per-length keys read from finished runs, the table, the figure."""

from __future__ import annotations

import json

import pytest

from attnmem.tools import length_study


def finished(path, metrics: dict[str, float]):
    path.mkdir()
    (path / "metrics.json").write_text(json.dumps(metrics))
    return path


def test_table_and_figure_from_two_runs(tmp_path, capsys):
    plain = finished(
        tmp_path / "plain",
        {
            "test/len1-10/token_acc": 0.9,
            "test/len11-20/token_acc": 0.5,
            "test/len30/exact_match": 0.0,
            "test/len30/token_acc": 0.2,
            "test/exact_match": 0.4,
        },
    )
    attn = finished(
        tmp_path / "attn",
        {"test/len1-10/token_acc": 1.0, "test/len11-20/token_acc": 0.99, "test/len30/exact_match": 0.25},
    )
    assert length_study.read_run(plain) == ({"1-10": 0.9, "11-20": 0.5}, {30: 0.0})
    out = tmp_path / "fig.png"
    length_study.main([f"rnn={plain}", f"attn_rnn={attn}", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "| 11-20 (token acc. %) | 99.0 | 50.0 |" in printed and "| 30 (exact match %) | 25.0 | 0.0 |" in printed
    assert out.stat().st_size > 0


def test_a_run_without_buckets_is_one_line_error(tmp_path, capsys):
    run = finished(tmp_path / "run", {"test/exact_match": 1.0})
    with pytest.raises(SystemExit):
        length_study.main([f"x={run}"])
    assert "no test/len<a>-<b>/token_acc keys" in capsys.readouterr().err


def test_bit_errors_of_sequence_runs_by_length(tmp_path, capsys):
    ntm = finished(tmp_path / "ntm", {"test/bit_errors": 0.0, "test/len40/bit_errors": 0.5, "test/len80/bit_errors": 4.0})
    lstm = finished(tmp_path / "lstm", {"test/bit_errors": 0.25, "test/len40/bit_errors": 30.0})
    out = tmp_path / "bits.png"
    length_study.main([f"ntm={ntm}", f"lstm={lstm}", "--train-max", "20", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "| 20 | 0.25 | 0.00 |" in printed and "| 40 | 30.00 | 0.50 |" in printed and "| 80 |  | 4.00 |" in printed
    assert out.stat().st_size > 0


def test_a_truncated_metrics_json_is_named_in_one_line(tmp_path):
    # the offline tools read a run's metrics.json through the verified reader, as load_run does
    from attnmem.core.errors import UserError
    from attnmem.tools import length_study

    (tmp_path / "metrics.json").write_text('{"test/len0-10/token_acc": 0.5,\n "test/')
    with pytest.raises(UserError) as raised:
        length_study.read_run(tmp_path)
    message = str(raised.value)
    assert "\n" not in message and f"{tmp_path / 'metrics.json'} is damaged (not valid JSON at line 2" in message
    assert "truncated" in message
