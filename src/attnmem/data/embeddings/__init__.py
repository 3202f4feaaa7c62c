"""The embeddings family's data: `EmbeddingsDataModule` (`datamodule`) and its corpus sources.

The sources: `text_folder.TextFolder` and `babi_corpus.BabiCorpus` (both on `folder.FolderCorpus`), and
`squad_contexts.SquadContexts` and `babi_gen_corpus.GeneratedBabiCorpus` (stories of the bAbI simulator, no download);
`corpus` tokenises and counts, `windows` streams batches.
"""
