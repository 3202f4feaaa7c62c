"""The qa family's data: one `QADataModule` (`datamodule`) and its sources (`babi_files.BabiFiles`,
`babi_generator.BabiGenerator`).

`babi_text` parses the bAbI v1.2 format both sources go through, `tensors` holds the vocabularies, tensors and
loaders, `babi_download` fetches the official archive.
"""
