"""The dims record a checkpoint keeps (`load_model` builds a model from it without the data)."""

import torch

from attnmem.core.dims import QADims, SequenceDims, from_record, to_record


def test_a_record_gives_the_same_dims_back_and_a_tensor_by_its_shape():
    seq = SequenceDims(input_size=9, output_size=8, test_lengths=[20, 40])
    assert to_record(seq) == {"class": "SequenceDims", "fields": {"input_size": 9, "output_size": 8,
                                                                  "test_lengths": [20, 40]}}
    assert from_record(to_record(seq)) == seq
    qa = QADims(vocab_size=5, num_answers=2, memory_size=3, sentence_len=4, query_len=4, answer_words=[3, 4],
                tasks=[1], embeddings=torch.ones(5, 7))
    record = to_record(qa)
    assert record["fields"]["embeddings"] == {"tensor_shape": [5, 7]}
    back = from_record(record)
    assert back.embeddings.shape == (5, 7) and back.embeddings.eq(0).all() and back.answer_words == [3, 4]
