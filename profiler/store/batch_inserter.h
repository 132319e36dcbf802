// batch_inserter.h: inserts rows of one table with a prepared multi-row INSERT
// ("INSERT INTO t (...) VALUES (?,..),(?,..),..." for `rows_per_statement` rows),
// which costs far less per row than one statement per row. The rows left over when
// a transaction commits go through the one-row statement. Columns and binders come
// from the table's declaration (tables.h).
#pragma once

#include "profiler/store/sqlite_util.h"
#include "profiler/store/tables.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::store {

template <typename Row>
class BatchInserter {
  public:
    BatchInserter() = default;

    void prepare(sqlite3* db, const std::string& path, int rows_per_statement) {
        const TableInfo& table = kTable<Row>;
        column_count_ = static_cast<int>(table.columns.size());
        std::string one_row = "(?";
        for (int i = 1; i < column_count_; ++i) one_row += ",?";
        one_row += ")";
        // OR FAIL: a failing row would not undo the rows before it, so SQLite needs no
        // statement journal (a savepoint per statement: ~15% of the insert cost).
        // The writer binds only valid rows; an error still aborts the whole write.
        std::string head = std::string("INSERT OR FAIL INTO ") + table.name + " (" + column_list(table) + ") VALUES ";
        std::string many = head;
        for (int r = 0; r < rows_per_statement; ++r) many += (r ? "," : "") + one_row;
        single_ = Statement(db, path, head + one_row);
        batch_ = Statement(db, path, many);
        staged_.resize(static_cast<std::size_t>(rows_per_statement));
        staged_count_ = 0;
    }

    void add(const Row& row) {
        staged_[staged_count_++] = row;
        if (staged_count_ == staged_.size()) {
            int parameter = 1;
            for (const Row& staged : staged_) {
                bind_row(batch_, parameter, staged);
                parameter += column_count_;
            }
            batch_.step_done();
            staged_count_ = 0;
            rows_written_ += staged_.size();
        }
    }

    // Writes the staged rows (before a commit).
    void finish() {
        for (std::size_t i = 0; i < staged_count_; ++i) {
            bind_row(single_, 1, staged_[i]);
            single_.step_done();
        }
        rows_written_ += staged_count_;
        staged_count_ = 0;
    }

    std::uint64_t rows_written() const { return rows_written_; }
    std::size_t staged() const { return staged_count_; }

  private:
    int column_count_ = 0;
    Statement single_;
    Statement batch_;
    std::vector<Row> staged_;
    std::size_t staged_count_ = 0;
    std::uint64_t rows_written_ = 0;
};

}  // namespace ember::store
