"""The span family's data: `SpanDataModule` and its sources, `SquadFiles` and `SpanGenerator`."""
