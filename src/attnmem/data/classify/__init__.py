"""The classify family: documents of sentences, one label each (hierarchical attention networks)."""
