// nested_events.cpp: the open-interval stack behind for_each_nested_event.
#include "profiler/export/nested_events.h"

#include "profiler/store/table_sql.h"

#include <algorithm>
#include <vector>

namespace ember::exporting {

void for_each_nested_event(store::Statement& query, const std::function<std::string(store::Statement&)>& name_of,
                           const OpenEvent& open, const CloseEvent& close) {
    struct Open {
        std::int64_t end_ns;
        std::string name;
    };
    std::vector<Open> stack;
    while (query.next_row()) {
        std::int64_t start = query.column_int64(0);
        std::int64_t end = query.column_int64(1);
        while (!stack.empty() && stack.back().end_ns <= start) {
            close(stack.back().name, stack.back().end_ns);
            stack.pop_back();
        }
        if (!stack.empty()) end = std::min(end, stack.back().end_ns);
        end = std::max(end, start);
        std::string name = name_of(query);
        open(name, start);
        stack.push_back({end, std::move(name)});
    }
    while (!stack.empty()) {
        close(stack.back().name, stack.back().end_ns);
        stack.pop_back();
    }
}

store::Statement thread_lane_query(const store::TraceReader& reader, trace::ThreadId thread) {
    store::Statement query =
        store::query(reader,
                     "SELECT start_ns, end_ns, name_id, 0 FROM ranges WHERE thread_id = ?1 AND depth >= 0 "
                     "UNION ALL SELECT start_ns, end_ns, name_id, 1 FROM api_calls WHERE thread_id = ?1 "
                     "ORDER BY 1, 2 DESC, 4");
    query.bind(1, thread);
    return query;
}

}  // namespace ember::exporting
