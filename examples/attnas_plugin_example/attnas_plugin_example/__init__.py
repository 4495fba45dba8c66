"""An example attnas plugin, found through the ``attnas.plugins`` entry point.

Importing the package registers

- the operation ``cosine`` in the ``mechanism`` pool (:mod:`.cosine_attention`): scaled
  cosine attention, usable by the ``attention-mechanisms`` space as a candidate;
- the space ``mechanism-width`` (:mod:`.mechanism_width`): a Transformer encoder whose
  attention mechanism and model width are searched.
"""

from attnas_plugin_example import cosine_attention, mechanism_width

__all__ = ["cosine_attention", "mechanism_width"]
