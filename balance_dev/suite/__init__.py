"""`make downstream-suite`: a plugin's whole CPU unit suite at two vLLM releases, each failure named."""
