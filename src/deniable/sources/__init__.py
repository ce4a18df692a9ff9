"""Where reports are read from besides the collector's database, as counts the estimate
engine (:mod:`deniable.estimators.engine`) reads: the Parquet archive of raw reports, reduced
on DuckDB or a Dask cluster (:mod:`.archivefiles`, :mod:`.archivecounts`, :mod:`.archivedask`,
:mod:`.archivesource`).

This package holds the file and engine I/O (pyarrow, DuckDB, Dask) so that
:mod:`deniable.estimators` keeps the statistics and the documents. It imports the client and
the estimators only; the collector and the CLI import it.
"""
