package geo

// SetCopyUnion makes s merge HyperLogLogs through copies on one node, as
// on a cluster, so a test can compare both ways on one server.
func SetCopyUnion(s *Store, on bool) { s.copyUnion = on }
