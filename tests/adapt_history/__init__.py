"""make adapt-history's judging on small vLLM-shaped trees written here: P_A, P_B and adapt's result, with the
answers written down by hand; and one real pair from the package index (``network``)."""
