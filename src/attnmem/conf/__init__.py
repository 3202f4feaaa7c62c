"""attnmem's Hydra configs, a package so that Hydra finds them as `pkg://attnmem.conf` wherever attnmem is installed."""
