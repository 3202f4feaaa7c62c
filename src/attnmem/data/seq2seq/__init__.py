"""The seq2seq family's data: `Seq2SeqDataModule` and its sources, `TokenTasks` and `ParallelTextFiles`."""
