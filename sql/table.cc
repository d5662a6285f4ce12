#include "sql/table.h"

#include <sqlite3.h>

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace podprof::sql {

std::optional<std::string> Bounds::Text(int column) const {
  auto it = equal_text.find(column);
  if (it == equal_text.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> Bounds::Int(int column) const {
  auto it = equal_int.find(column);
  if (it == equal_int.end()) return std::nullopt;
  return it->second;
}

int64_t Bounds::Min(int column, int64_t otherwise) const {
  auto it = min.find(column);
  return it == min.end() ? otherwise : it->second;
}

int64_t Bounds::Max(int column, int64_t otherwise) const {
  auto it = max.find(column);
  return it == max.end() ? otherwise : it->second;
}

void ColumnSink::Int(int64_t v) { sqlite3_result_int64(ctx_, v); }
void ColumnSink::Real(double v) { sqlite3_result_double(ctx_, v); }
void ColumnSink::Text(const std::string& v) {
  sqlite3_result_text(ctx_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
void ColumnSink::Null() { sqlite3_result_null(ctx_); }

namespace {

// SQLite's structs come first, so that SQLite's pointers are ours.
struct VTab {
  sqlite3_vtab base;
  Table* table;
  Budget* budget;
};

struct VCursor {
  sqlite3_vtab_cursor base;
  std::unique_ptr<Cursor> cursor;
  bool eof = true;
  int64_t rowid = 0;
};

struct Module {
  Table* table;
  Budget* budget;
};

int Fail(sqlite3_vtab* vtab, const absl::Status& status) {
  sqlite3_free(vtab->zErrMsg);
  vtab->zErrMsg = sqlite3_mprintf("%s", std::string(status.message()).c_str());
  return SQLITE_ERROR;
}

std::string CreateStatement(const std::vector<ColumnDef>& columns) {
  std::string sql = "CREATE TABLE x(";
  for (size_t i = 0; i < columns.size(); ++i) {
    const char* type = columns[i].type == ColumnType::kInteger ? "INTEGER"
                       : columns[i].type == ColumnType::kReal  ? "REAL"
                                                               : "TEXT";
    absl::StrAppend(&sql, i ? ", " : "", columns[i].name, " ", type);
  }
  return sql + ")";
}

int Connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char** err) {
  auto* module = static_cast<Module*>(aux);
  const int rc = sqlite3_declare_vtab(db, CreateStatement(module->table->columns()).c_str());
  if (rc != SQLITE_OK) {
    *err = sqlite3_mprintf("declaring a table: %s", sqlite3_errmsg(db));
    return rc;
  }
  auto* vtab = new VTab();
  vtab->table = module->table;
  vtab->budget = module->budget;
  *out = &vtab->base;
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* vtab) {
  delete reinterpret_cast<VTab*>(vtab);
  return SQLITE_OK;
}

// Each usable constraint on a pushed column becomes an argument of Filter; idxStr says which
// ("e3" equality on column 3, "g5" a lower bound on column 5, "l5" an upper one, each with its
// operator so that a strict bound moves by one).
int BestIndex(sqlite3_vtab* vtab, sqlite3_index_info* info) {
  const auto& columns = reinterpret_cast<VTab*>(vtab)->table->columns();
  std::string plan;
  int args = 0;
  double cost = 1e9;
  for (int i = 0; i < info->nConstraint; ++i) {
    const auto& c = info->aConstraint[i];
    if (!c.usable || c.iColumn < 0 || static_cast<size_t>(c.iColumn) >= columns.size()) continue;
    const ColumnDef& col = columns[c.iColumn];
    if (!col.pushed) continue;
    char op = 0;
    switch (c.op) {
      case SQLITE_INDEX_CONSTRAINT_EQ:
        op = 'e';
        break;
      case SQLITE_INDEX_CONSTRAINT_GT:
        op = col.type == ColumnType::kInteger ? 'G' : 0;
        break;
      case SQLITE_INDEX_CONSTRAINT_GE:
        op = col.type == ColumnType::kInteger ? 'g' : 0;
        break;
      case SQLITE_INDEX_CONSTRAINT_LT:
        op = col.type == ColumnType::kInteger ? 'L' : 0;
        break;
      case SQLITE_INDEX_CONSTRAINT_LE:
        op = col.type == ColumnType::kInteger ? 'l' : 0;
        break;
      default:
        break;
    }
    if (op == 0) continue;
    info->aConstraintUsage[i].argvIndex = ++args;
    absl::StrAppend(&plan, plan.empty() ? "" : ",", std::string(1, op), c.iColumn);
    cost /= op == 'e' ? 100 : 4;
  }
  info->estimatedCost = cost;
  info->idxStr = sqlite3_mprintf("%s", plan.c_str());
  info->needToFreeIdxStr = 1;
  return SQLITE_OK;
}

int Open(sqlite3_vtab*, sqlite3_vtab_cursor** out) {
  *out = &(new VCursor())->base;
  return SQLITE_OK;
}

int Close(sqlite3_vtab_cursor* cursor) {
  delete reinterpret_cast<VCursor*>(cursor);
  return SQLITE_OK;
}

int Advance(VCursor* c) {
  VTab* vtab = reinterpret_cast<VTab*>(c->base.pVtab);
  absl::StatusOr<bool> more = c->cursor->Next();
  if (!more.ok()) {
    c->eof = true;
    return Fail(&vtab->base, more.status());
  }
  c->eof = !*more;
  ++c->rowid;
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cursor, int, const char* plan, int argc, sqlite3_value** argv) {
  auto* c = reinterpret_cast<VCursor*>(cursor);
  VTab* vtab = reinterpret_cast<VTab*>(cursor->pVtab);
  Bounds bounds;
  int arg = 0;
  for (absl::string_view part : absl::StrSplit(plan ? plan : "", ',', absl::SkipEmpty())) {
    if (arg >= argc) break;
    const char op = part[0];
    const int column = std::atoi(std::string(part.substr(1)).c_str());
    sqlite3_value* v = argv[arg++];
    const int type = sqlite3_value_type(v);
    if (op == 'e') {
      if (type == SQLITE_INTEGER) {
        bounds.equal_int[column] = sqlite3_value_int64(v);
      } else if (type == SQLITE_TEXT) {
        const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(v));
        bounds.equal_text[column] = std::string(text, sqlite3_value_bytes(v));
      }
      // A NULL, real or blob equality is left to SQLite, which checks every row anyway.
      continue;
    }
    if (type != SQLITE_INTEGER) continue;
    const int64_t x = sqlite3_value_int64(v);
    if (op == 'G' || op == 'g') {
      const int64_t lo = op == 'G' ? (x == INT64_MAX ? x : x + 1) : x;
      bounds.min[column] = std::max(bounds.Min(column, INT64_MIN), lo);
    } else {
      const int64_t hi = op == 'L' ? (x == INT64_MIN ? x : x - 1) : x;
      bounds.max[column] = std::min(bounds.Max(column, INT64_MAX), hi);
    }
  }
  absl::Status time = vtab->budget->CheckTime();
  if (!time.ok()) return Fail(&vtab->base, time);
  absl::StatusOr<std::unique_ptr<Cursor>> opened = vtab->table->Open(bounds, *vtab->budget);
  if (!opened.ok()) return Fail(&vtab->base, opened.status());
  c->cursor = std::move(*opened);
  c->rowid = 0;
  return Advance(c);
}

int Next(sqlite3_vtab_cursor* cursor) { return Advance(reinterpret_cast<VCursor*>(cursor)); }

int Eof(sqlite3_vtab_cursor* cursor) { return reinterpret_cast<VCursor*>(cursor)->eof; }

int ColumnValue(sqlite3_vtab_cursor* cursor, sqlite3_context* ctx, int column) {
  ColumnSink sink(ctx);
  reinterpret_cast<VCursor*>(cursor)->cursor->Column(column, sink);
  return SQLITE_OK;
}

int RowId(sqlite3_vtab_cursor* cursor, sqlite_int64* out) {
  *out = reinterpret_cast<VCursor*>(cursor)->rowid;
  return SQLITE_OK;
}

// Read-only and eponymous: no xCreate (the table exists by its module's name), no xUpdate
// (SQLite refuses writes), no transactions.
const sqlite3_module kModule = {
    /*iVersion=*/0,
    /*xCreate=*/nullptr,
    /*xConnect=*/Connect,
    /*xBestIndex=*/BestIndex,
    /*xDisconnect=*/Disconnect,
    /*xDestroy=*/Disconnect,
    /*xOpen=*/Open,
    /*xClose=*/Close,
    /*xFilter=*/Filter,
    /*xNext=*/Next,
    /*xEof=*/Eof,
    /*xColumn=*/ColumnValue,
    /*xRowid=*/RowId,
    /*xUpdate=*/nullptr,
    /*xBegin=*/nullptr,
    /*xSync=*/nullptr,
    /*xCommit=*/nullptr,
    /*xRollback=*/nullptr,
    /*xFindFunction=*/nullptr,
    /*xRename=*/nullptr,
    /*xSavepoint=*/nullptr,
    /*xRelease=*/nullptr,
    /*xRollbackTo=*/nullptr,
    /*xShadowName=*/nullptr,
};

}  // namespace

absl::Status RegisterTable(sqlite3* db, const std::string& name, Table* table, Budget* budget) {
  auto* module = new Module{table, budget};
  const int rc = sqlite3_create_module_v2(db, name.c_str(), &kModule, module,
                                          [](void* p) { delete static_cast<Module*>(p); });
  if (rc != SQLITE_OK) {
    return absl::InternalError(
        absl::StrCat("sql: registering table ", name, ": ", sqlite3_errmsg(db)));
  }
  return absl::OkStatus();
}

}  // namespace podprof::sql
