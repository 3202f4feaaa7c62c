"""`replicas=R`: R seeds of one run trained side by side in one process, replica r as the run with `seed=seed+r`.

Everything that makes R seeds one run lives here, and nothing outside it deals with replicas (the runtime calls
`build` once, the sweep tools call `sweep`):

- `build`: the config's checks, the R family modules built under their own seeds, the data as R replicas read it;
- `module`: `Replicas`, the LightningModule that trains them: per-replica early stopping, best state and
  non-finite stop, the selection of the reported replica, the checkpoint's replica state;
- `streams`: each replica's random states, and the loaders that draw from them;
- `batch`: the replicas' forwards as one `vmap` of `functional_call`, or one folded batch;
- `models`: which models batch, and how (MemN2N's padding, RN's draws and folding); a model file knows nothing
  of replicas;
- `sweep`: a sweep's seed axis folded into `replicas=R` jobs, and their rows unfolded.

Importing this package imports none of them (the sweep tools start without torch).
"""
