// writer.cpp: TraceWriter (implementation in progress).
#include "profiler/store/writer.h"
