"""One global order of sample indices, the same on every rank and worker count:

* ``permutation``: a seeded permutation computed block by block (no array of every index);
* ``mixing``: weights, temperature and phases of a mixture resolved into per-phase quotas;
* ``samplers``: ``DistributedSampler`` and ``MixtureSampler`` over those orders.
"""
