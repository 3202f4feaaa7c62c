"""GloVe-format vectors as published: 840B's tokens with spaces in them, a word2vec header, a short line named."""

from __future__ import annotations

import pytest
from conftest import one_line

from attnmem.core.errors import UserError
from attnmem.core.glove import read_vectors


def test_a_token_with_spaces_is_what_precedes_the_last_d_fields(tmp_path):
    path = tmp_path / "glove.840B.300d.txt"
    path.write_text("the 0.1 0.2 0.3\n. . . 1 2 3\nat the end -1 -2 -3\nThe 4 5 6\n")
    vectors = read_vectors(path, [". . .", "at the end", "the", "missing"])
    assert vectors.dim == 3
    assert {w: v.tolist() for w, v in vectors.table.items()} == {
        "the": pytest.approx([0.1, 0.2, 0.3]), ". . .": [1, 2, 3], "at the end": [-1, -2, -3]}


def test_a_word2vec_header_is_read_as_the_count_and_the_width(tmp_path):
    path = tmp_path / "vectors.txt"
    path.write_text("2 3\ncat 1 0 0\ndog 0 1 0\n")
    vectors = read_vectors(path, ["cat", "dog"])
    assert vectors.dim == 3 and vectors.table["dog"].tolist() == [0, 1, 0]


def test_a_short_line_names_its_file_and_line(tmp_path):
    path = tmp_path / "vectors.txt"
    path.write_text("cat 1 0 0\ndog 0 1\n")
    with pytest.raises(UserError) as err:
        read_vectors(path, ["cat"])
    one_line(str(err.value), f"{path}:2: expected a word and 3 numbers, got 2 values")
