"""The README's model × data table is the one the code gives; user configs are found on Hydra's search path."""

from __future__ import annotations

from conftest import CONF, ROOT

from attnmem.runtime import run
from attnmem.tools import compat


def test_readme_holds_the_current_compatibility_table():
    readme = (ROOT / "README.md").read_text()
    assert f"{compat.START}\n{compat.table(CONF)}\n{compat.END}" in readme, (
        "README.md's model/data table is stale: run `python -m attnmem.tools.compat --update README.md`"
    )


def test_table_marks_exactly_the_pairs_whose_families_meet():
    rows = {line.split("|")[1].strip(" `"): line.split("|")[3] for line in compat.table(CONF).splitlines()[2:]}
    assert "`babi_gen`" in rows["memn2n"] and "`copy`" not in rows["memn2n"]
    assert "`copy`" in rows["ntm"] and "`babi`" not in rows["ntm"]


def test_table_shows_which_models_use_the_attention_score():
    rows = {line.split("|")[1].strip(" `"): line.split("|")[4].strip() for line in compat.table(CONF).splitlines()[2:]}
    assert rows["memn2n"] == rows["ntm"] == rows["transformer"] == "used"
    assert rows["rnn_qa"] == rows["rnn_sequence"] == rows["rnn_seq2seq"] == rows["hopfield"] == "ignored"


def test_update_rewrites_only_between_the_markers(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{compat.START}\nold table\n{compat.END}\noutro\n")
    compat.update(page, CONF)
    assert page.read_text() == f"intro\n{compat.START}\n{compat.table(CONF)}\n{compat.END}\noutro\n"


def test_user_configs_outside_the_repository_via_the_search_path(compose_cfg, tmp_path):
    mine = tmp_path / "my_conf"
    (mine / "model").mkdir(parents=True)
    (mine / "experiment").mkdir()
    (mine / "model" / "my_memn2n.yaml").write_text("defaults:\n  - memn2n\n  - _self_\n\nhops: 1\nembed_dim: 8\n")
    (mine / "experiment" / "my_recipe.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /model: my_memn2n\n\nname: my_recipe\noptimizer:\n  lr: 0.01\n"
    )
    search = f"hydra.searchpath=[file://{mine}]"
    cfg = compose_cfg(search, "model=my_memn2n")
    assert cfg.model._target_ == "attnmem.tasks.qa_nets.MemN2NQA" and cfg.model.hops == 1 and cfg.model.embed_dim == 8
    assert cfg.data.source._target_.endswith("BabiGenerator")  # memn2n's natural data, inherited
    cfg = compose_cfg(
        search,
        "experiment=my_recipe",
        "data.source.num_train=60",
        "data.source.num_val=20",
        "data.source.num_test=20",
        "debug=fdr",
        "trainer.enable_progress_bar=false",
    )
    assert cfg.name == "my_recipe" and cfg.optimizer.lr == 0.01 and cfg.model.hops == 1
    run.train(cfg)
    assert (tmp_path / "run" / "metrics.json").is_file()


def test_no_config_folder_is_one_line_not_an_empty_table(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["attnmem-compat", "--conf", "empty"])
    try:
        compat.main()
    except SystemExit as done:
        assert done.code == 1
    else:
        raise AssertionError("attnmem-compat exited 0 without a config folder")
    err = capsys.readouterr()
    assert err.out == "" and err.err == (
        "error: --conf empty: no model/*.yaml there; pass a config folder with model/ and data/ (or no --conf: "
        "attnmem's own)\n"
    )


def test_the_table_comes_from_the_packaged_configs_in_any_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["attnmem-compat"])
    compat.main()
    out = capsys.readouterr().out
    assert out.strip() == compat.table(CONF) and out.count("\n") == len(list((CONF / "model").glob("*.yaml"))) + 2
