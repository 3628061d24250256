"""costs: the PALEO analytical cost model (Qi, Sparks, Talwalkar, ICLR 2017), vectorised.

Pure numpy; knows nothing of catalogs on disk, search or the command line.
"""
