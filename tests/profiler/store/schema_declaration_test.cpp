// The table declarations of tables.h against what they promise: the file a writer
// creates has exactly the declared columns (as SQLite itself reports them), and
// docs/trace-schema.md lists exactly the declared columns, table by table, in order.
#include "profiler/store/schema.h"
#include "profiler/store/tables.h"
#include "profiler/store/writer.h"
#include "tests/support/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ember::store {
namespace {

std::string temp_path(const char* name) {
    return (std::filesystem::temp_directory_path() / (std::string("ember_schema_declaration_") + name)).string();
}

// One row of PRAGMA table_info, as SQLite parsed the CREATE statement.
struct SqliteColumn {
    std::string name, type, default_value;
    bool not_null = false;
    int primary_key = 0;
};

std::map<std::string, std::vector<SqliteColumn>> columns_in_file(const std::string& path) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    std::map<std::string, std::vector<SqliteColumn>> tables;
    sqlite3_stmt* statement = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT m.name, p.name, p.type, p.\"notnull\", COALESCE(p.dflt_value, ''), p.pk "
                                 "FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table' "
                                 "ORDER BY m.name, p.cid",
                                 -1, &statement, nullptr),
              SQLITE_OK);
    auto text = [&](int column) {
        return std::string(reinterpret_cast<const char*>(sqlite3_column_text(statement, column)));
    };
    while (sqlite3_step(statement) == SQLITE_ROW)
        tables[text(0)].push_back(
            {text(1), text(2), text(4), sqlite3_column_int(statement, 3) != 0, sqlite3_column_int(statement, 5)});
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return tables;
}

TEST(TraceSchemaDeclaration, WrittenFileHasExactlyTheDeclaredColumns) {
    const std::string path = temp_path("written.db");
    testing::write_sample_trace(path);
    const auto tables = columns_in_file(path);
    EXPECT_EQ(tables.size(), std::size(kTables));
    for (const TableInfo& table : kTables) {
        SCOPED_TRACE(table.name);
        auto found = tables.find(table.name);
        ASSERT_NE(found, tables.end());
        const std::vector<SqliteColumn>& in_file = found->second;
        ASSERT_EQ(in_file.size(), table.columns.size());
        for (std::size_t i = 0; i < in_file.size(); ++i) {
            const ColumnInfo& declared = table.columns[i];
            SCOPED_TRACE(declared.name);
            EXPECT_EQ(in_file[i].name, declared.name);
            EXPECT_EQ(in_file[i].type, sql_type_name(declared.type));
            EXPECT_EQ(in_file[i].not_null, declared.not_null());
            EXPECT_EQ(in_file[i].default_value, declared.options.default_sql ? declared.options.default_sql : "");
            EXPECT_EQ(in_file[i].primary_key != 0,
                      declared.options.primary_key ||
                          table.composite_key != nullptr &&
                              std::string(table.composite_key).find(declared.name) != std::string::npos);
            // A column added after its table must say what older files read as.
            if (declared.options.since_version > table.since_version) EXPECT_NE(declared.options.default_sql, nullptr);
        }
    }
    std::filesystem::remove(path);
}

// The tables of docs/trace-schema.md's "## Tables" section: for each "### name[, name]"
// heading, the first cells of its first markdown table ("a, b" lists two columns;
// "table.column" names the table when a heading covers several).
std::map<std::string, std::vector<std::string>> documented_columns(const std::string& doc_path, int* version) {
    std::ifstream file(doc_path);
    EXPECT_TRUE(file.good()) << doc_path;
    std::map<std::string, std::vector<std::string>> tables;
    std::vector<std::string> heading_tables;
    bool in_tables = false, in_markdown_table = false, table_done = false;
    auto split = [](const std::string& text, const std::string& separator) {
        std::vector<std::string> parts;
        std::size_t at = 0;
        for (std::size_t next; (next = text.find(separator, at)) != std::string::npos; at = next + separator.size())
            parts.push_back(text.substr(at, next - at));
        parts.push_back(text.substr(at));
        return parts;
    };
    std::string line;
    while (std::getline(file, line)) {
        if (line.rfind("# ", 0) == 0 && line.find("(schema version ") != std::string::npos)
            *version = std::stoi(line.substr(line.find("(schema version ") + 16));
        if (line.rfind("## ", 0) == 0) in_tables = line == "## Tables";
        if (!in_tables) continue;
        if (line.rfind("### ", 0) == 0) {
            std::string names = line.substr(4);
            names = names.substr(0, names.find(" —"));
            names = names.substr(0, names.find(" ("));
            heading_tables = split(names, ", ");
            for (const std::string& table : heading_tables) tables[table];
            in_markdown_table = table_done = false;
            continue;
        }
        if (line.rfind("|", 0) != 0) {
            if (in_markdown_table) table_done = true;
            in_markdown_table = false;
            continue;
        }
        if (table_done) continue;
        const std::string cell = split(line, "|").at(1);
        const std::size_t begin = cell.find_first_not_of(' '), end = cell.find_last_not_of(' ');
        const std::string first = begin == std::string::npos ? "" : cell.substr(begin, end - begin + 1);
        if (!in_markdown_table) {  // the header row
            in_markdown_table = true;
            continue;
        }
        if (first.rfind("---", 0) == 0) continue;
        for (const std::string& name : split(first, ", ")) {
            const std::size_t dot = name.find('.');
            if (dot == std::string::npos) {
                EXPECT_EQ(heading_tables.size(), 1u) << "a row of several tables names no table: " << line;
                tables[heading_tables.at(0)].push_back(name);
            } else {
                tables[name.substr(0, dot)].push_back(name.substr(dot + 1));
            }
        }
    }
    return tables;
}

TEST(TraceSchemaDeclaration, DocumentationListsExactlyTheDeclaredColumns) {
    int documented_version = 0;
    const auto documented =
        documented_columns(std::string(EMBER_TEST_SOURCE_DIR) + "/docs/trace-schema.md", &documented_version);
    EXPECT_EQ(documented_version, kSchemaVersion) << "docs/trace-schema.md's title names another schema version";
    EXPECT_EQ(documented.size(), std::size(kTables));
    for (const TableInfo& table : kTables) {
        SCOPED_TRACE(table.name);
        auto found = documented.find(table.name);
        ASSERT_NE(found, documented.end()) << "docs/trace-schema.md has no section for the table";
        std::vector<std::string> declared;
        for (const ColumnInfo& column : table.columns) declared.push_back(column.name);
        EXPECT_EQ(found->second, declared);
    }
}

TEST(TraceSchemaDeclaration, RowsBindAndReadBackThroughTheDeclaration) {
    // A memory event through a one-row table of the declared columns: every field back.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
    exec_sql(db, ":memory:", create_table_sql(kTable<trace::MemoryEvent>).c_str());
    trace::MemoryEvent event{123, 1, trace::MemoryAction::oom, 0xffff'0000'0000'1000ull, 4096, 7, 9, 1 << 20, 3};
    {
        Statement insert(db, ":memory:", insert_sql<trace::MemoryEvent>());
        bind_row(insert, 1, event);
        insert.step_done();
        Statement select(db, ":memory:", "SELECT " + column_list(kTable<trace::MemoryEvent>) + " FROM memory_events");
        ASSERT_TRUE(select.next_row());
        EXPECT_EQ(read_row<trace::MemoryEvent>(select), event);
        // By name: the column the declaration puts at thread_id holds the thread.
        EXPECT_EQ(select.column_int64(column_index<trace::MemoryEvent>("thread_id")), 3);
    }
    sqlite3_close(db);
}

}  // namespace
}  // namespace ember::store
