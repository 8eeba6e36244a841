import postgres from 'postgres';

type CustomTypes = { bigint: bigint };
export type Sql = postgres.Sql<CustomTypes>;
/** A transaction handle or the pool: data-access functions that may run inside a transaction take this. */
export type Db = Sql | postgres.TransactionSql<CustomTypes>;
/** A piece of SQL (a tagged template not yet run) to compose into a statement. */
export type SqlFragment = postgres.Fragment;

export interface SqlOptions {
  max?: number;
  /** Application name shown in pg_stat_activity, to tell the edge from the workers. */
  appName?: string;
  /** Upper bound of one statement, in milliseconds (Postgres `statement_timeout`); default 30 s. */
  statementTimeoutMs?: number;
}

/** One postgres.js pool per process. bigint columns come back as JS bigint: money never goes through a float. */
export function createSql(url: string, options: SqlOptions = {}): Sql {
  return postgres(url, {
    max: options.max ?? 20,
    idle_timeout: 30,
    connect_timeout: 5,
    onnotice: () => {},
    // Every statement is bounded: a stuck query fails (57014, answered 503) instead of holding a
    // connection and a caller forever.
    connection: { application_name: options.appName ?? 'platform', statement_timeout: options.statementTimeoutMs ?? 30_000 },
    types: {
      bigint: postgres.BigInt,
    },
  });
}
