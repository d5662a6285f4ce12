// The fleet store's tables in ClickHouse (docs/FLEET.md): MergeTree tables ordered by kernel
// identity (or pod) and time, partitioned by month of the capture's start, written by each
// aggregator; and a `<table>_all` beside each that queries read: a Merge table over the one
// local table, or with a cluster a Distributed table over every shard's. The SQL runs on
// ClickHouse 18.16 and on current releases (no TTL, codecs, DateTime64, Map, window
// functions or query parameters).
#ifndef PODPROF_FLEET_SCHEMA_H_
#define PODPROF_FLEET_SCHEMA_H_

#include <string>
#include <vector>

namespace podprof::fleet {

// The tables, in the order a capture's rows are inserted: `captures` last, so a capture a
// query lists has all its rows.
enum class Table {
  kKernels,
  kKernelStats,
  kKernelRollups,
  kCounterRollups,
  kStragglers,
  kCaptureHosts,
  kCaptures,
};
inline constexpr Table kTables[] = {
    Table::kKernels,    Table::kKernelStats,  Table::kKernelRollups, Table::kCounterRollups,
    Table::kStragglers, Table::kCaptureHosts, Table::kCaptures};

struct Column {
  const char* name;
  const char* type;
  // The DEFAULT that rows written before the column existed read as (an older podprof's, or
  // a table it created and Prepare added the column to), where ClickHouse's zero would
  // mislead; none when zero means "unknown" already.
  const char* fill = nullptr;
};

struct TableDef {
  const char* name;
  std::vector<Column> columns;  // in RowBinary order
  const char* order_by;
  // ReplacingMergeTree for rows that repeat by design (kernel identities, sent with every
  // capture that ran them); the others are plain MergeTree with one row per fact.
  bool replacing = false;
};

const TableDef& Definition(Table t);

// CREATE TABLE IF NOT EXISTS for `db`.<table> (the local table aggregators write).
std::string CreateLocal(Table t, const std::string& db);
// CREATE TABLE IF NOT EXISTS for `db`.<table>_all: Merge over the local table, or with
// `cluster` non-empty Distributed over the cluster's shards.
std::string CreateAll(Table t, const std::string& db, const std::string& cluster);
// "ALTER TABLE db.table ADD COLUMN ...": `c`, one of t's columns, for a table an older
// podprof created without it (rows it holds read as c's fill).
std::string AddColumn(Table t, const Column& c, const std::string& db);
// DROP TABLE IF EXISTS for `db`.<table>_all, which holds no data: a Merge or Distributed
// table keeps the columns its table had when it was created, so after AddColumn it is made
// again (CreateAll) to show the new ones.
std::string DropAll(Table t, const std::string& db);
// "INSERT INTO db.table (columns...) FORMAT RowBinary".
std::string InsertInto(Table t, const std::string& db);

}  // namespace podprof::fleet

#endif  // PODPROF_FLEET_SCHEMA_H_
