"""The vision tower and what feeds it: image preprocessing, patch grids, multimodal positions.

``encoder`` is the transformer that turns patches into features of the text hidden size;
``grid`` holds the pure index arithmetic over an image's patch grid (merge-block order,
rotary coordinates, position-table interpolation); ``preprocess`` turns decoded pixels into
patches the way the family's image processor does; ``prompt`` expands image placeholders and
computes the prompt's three-axis rope positions. Only ``encoder`` needs torch.
"""
