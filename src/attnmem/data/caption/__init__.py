"""The caption family's data: images with captions, from the digits generator or a COCO-format folder."""
