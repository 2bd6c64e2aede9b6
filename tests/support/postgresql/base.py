"""The test suite's PostgreSQL backend: Django's own, with a flush that truncates only the tables
holding rows. Every transactional test flushes each alias at its end, and TRUNCATE costs about
10 ms a table whatever the table holds (it gives each one new files): about 1 s for the platform's
75 tables, while a test writes to a few of them. An empty table needs no flush."""

from django.db.backends.postgresql import base, operations


class DatabaseOperations(operations.DatabaseOperations):
    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if tables and not reset_sequences:  # RESTART IDENTITY resets the sequences of empty tables too
            tables = self._tables_with_rows(tables)
            allow_cascade = True  # an empty table referencing one of them is truncated with it
        return super().sql_flush(style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)

    def _tables_with_rows(self, tables: list[str]) -> list[str]:
        probes = " UNION ALL ".join(
            f"SELECT %s WHERE EXISTS (SELECT 1 FROM {self.quote_name(table)})"  # introspected names, quoted
            for table in tables
        )
        with self.connection.cursor() as cursor:
            cursor.execute(probes, list(tables))
            return [row[0] for row in cursor.fetchall()]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
