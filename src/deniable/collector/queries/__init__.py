"""The collector's query layer: what each read of estimates means, apart from HTTP.

An :class:`~.query.EstimateQuery` names one question (metric, range, confidence, method,
pooling, quantiles, candidates, by, where, compare, compare_to) and checks itself; plain
functions answer it from the collector's counts (:func:`.estimate.estimate`,
:func:`.series.series`, :mod:`.breakdown`, :mod:`.changes`, :func:`.privacy.privacy`). They
know no request and raise :class:`~.refusal.QueryRefused` for a question they will not answer,
which the routes, the dashboard and the Prometheus exposition each turn into their own answer
(Netflix Dispatch's views/service split: the routes are the views).
"""
