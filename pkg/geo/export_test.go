package geo

// SetMergeHere makes s merge every union of HyperLogLogs itself (GET and
// merge, as for many of them or on a cluster), so a test can compare both
// ways on one server.
func SetMergeHere(s *Store, on bool) { s.mergeHere = on }

// HLLCount merges the raw strings of HyperLogLogs (GET's replies) as a
// query does and returns the estimate.
func HLLCount(raws ...string) (int64, error) {
	var r hllRegs
	for _, raw := range raws {
		if err := r.merge(raw); err != nil {
			return 0, err
		}
	}
	return r.count(), nil
}
