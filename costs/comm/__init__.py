"""Communication: the AllReduce schemes (``schemes``: PALEO's and NCCL's, a registry), alpha-beta
collective costs (``collectives``: ring, tree, hierarchical; all-gather, reduce-scatter,
all-to-all), what a multi-tier network leaves of them (``fabric``: oversubscribed switch tiers,
hops, in-network reduction) and how much of them hides behind compute (``overlap``: DDP buckets).

May import: ``costs.errors`` and its own modules.
"""
