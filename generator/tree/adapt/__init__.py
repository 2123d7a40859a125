"""``adapt``: the mechanical part of a vLLM bump written into a plugin's tree, all files or none.

``plan`` reads what ``impact`` found and builds every new file text and what is left to a person;
``names`` rewrites moved vLLM names (libcst), ``copies`` puts each copy ``judge.resync`` merged in its
file, ``write`` writes every file or none (``--dry-run``: the diff only), ``report`` prints it.
"""
