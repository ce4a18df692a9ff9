"""deniable's service kit: what the collector and the shuffler both serve HTTP with.

Bounded body reads (:mod:`.body`), bearer tokens (:mod:`.bearer`, :mod:`.tokens`), the origins
and CORS of device routes (:mod:`.origins`, :mod:`.crossorigin`), the hardened uvicorn launch
(:mod:`.protocol`, :mod:`.launch`), the loopback defaults and guard (:mod:`.listening`) and what a
fault's log line may say (:mod:`.faults`). It imports only ``deniable.client`` among deniable's
packages, so both servers build on it without importing each other. Nothing is imported here:
each module is imported by name, so the light ones load without FastAPI or uvicorn.
"""
