"""The embeddings family's data: `EmbeddingsDataModule` (`datamodule`) and its corpus sources (`text_folder.TextFolder`,
`babi_corpus.BabiCorpus`, `squad_contexts.SquadContexts`); `corpus` tokenises and counts, `windows` streams batches.
"""
