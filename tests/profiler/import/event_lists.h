// event_lists.h: the importer tests take all_events() from tests/support/event_lists.h.
#pragma once

#include "tests/support/event_lists.h"

namespace ember::import_test {

using test_support::all_events;

}  // namespace ember::import_test
