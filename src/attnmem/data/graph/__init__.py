"""The graph family's datamodule and its sources: the karate club, a block model, edge-list files, Cora."""
