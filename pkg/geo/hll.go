package geo

import (
	"errors"
	"math"
)

// Redis' HyperLogLog, read and merged here so that a union of HyperLogLogs
// that PFCOUNT cannot take in one command (more than readChunk of them, or
// in different hash slots of a cluster) needs no write: the API's Redis
// user may only read. The format and the estimator are Redis'
// (src/hyperloglog.c, Redis 5 and later): a 16-byte header ("HYLL", the
// encoding, 3 unused bytes, the cached cardinality) and 2^14 registers of
// 6 bits, dense (packed, little-endian bit order) or sparse (run-length
// opcodes), and Otmar Ertl's improved raw estimator. An estimate from the
// registers merged here equals what PFCOUNT of the same keys answers
// (TestUnionWays, TestHLLMatchesPFCOUNT).

const (
	hllP         = 14
	hllQ         = 64 - hllP
	hllRegisters = 1 << hllP
	hllBits      = 6
	hllHeader    = 16
	hllDense     = 0
	hllSparse    = 1
	hllAlphaInf  = 0.721347520444481703680 // 0.5 / ln(2)
)

// errHLL means a value is not a HyperLogLog Redis wrote.
var errHLL = errors.New("not a Redis HyperLogLog")

// hllRegs are the registers of a union of HyperLogLogs, 8 bits each.
type hllRegs [hllRegisters]uint8

// merge folds the raw string of one HyperLogLog (what GET returns) into r:
// each register becomes the larger of the two.
func (r *hllRegs) merge(raw string) error {
	if len(raw) < hllHeader || raw[:4] != "HYLL" {
		return errHLL
	}
	data := raw[hllHeader:]
	switch raw[4] {
	case hllDense:
		if len(data) != (hllRegisters*hllBits+7)/8 {
			return errHLL
		}
		for i := range hllRegisters {
			b := i * hllBits / 8
			fb := uint(i * hllBits & 7)
			v := uint(data[b]) >> fb
			if b+1 < len(data) {
				v |= uint(data[b+1]) << (8 - fb)
			}
			if v := uint8(v & (1<<hllBits - 1)); v > r[i] {
				r[i] = v
			}
		}
	case hllSparse:
		i := 0
		for p := 0; p < len(data); {
			op := data[p]
			var run int
			var v uint8
			switch {
			case op&0xc0 == 0: // ZERO: 00xxxxxx, a run of xxxxxx+1 zeros
				run = int(op&0x3f) + 1
				p++
			case op&0xc0 == 0x40: // XZERO: 01xxxxxx yyyyyyyy, a run of up to 16384 zeros
				if p+1 >= len(data) {
					return errHLL
				}
				run = (int(op&0x3f)<<8 | int(data[p+1])) + 1
				p += 2
			default: // VAL: 1vvvvvxx, xx+1 registers of value vvvvv+1
				v = (op>>2)&0x1f + 1
				run = int(op&0x3) + 1
				p++
			}
			if i+run > hllRegisters {
				return errHLL
			}
			if v > 0 {
				for j := i; j < i+run; j++ {
					r[j] = max(r[j], v)
				}
			}
			i += run
		}
		if i != hllRegisters {
			return errHLL
		}
	default:
		return errHLL
	}
	return nil
}

// count is Redis' estimate of the distinct elements of the registers
// (hllCount). The explicit float64 conversions keep the compiler from
// fusing a multiply and an add, which would round differently from Redis.
func (r *hllRegs) count() int64 {
	var histo [64]int
	for _, v := range r {
		histo[v]++
	}
	const m = float64(hllRegisters)
	z := float64(m * hllTau(float64(m-float64(histo[hllQ+1]))/m))
	for j := hllQ; j >= 1; j-- {
		z += float64(histo[j])
		z *= 0.5
	}
	z += float64(m * hllSigma(float64(histo[0])/m))
	return int64(math.Round(float64(float64(hllAlphaInf*m)*m) / z))
}

// hllSigma is Redis' hllSigma (Ertl's sigma function).
func hllSigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		prev := z
		z += float64(x * y)
		y += y
		if prev == z {
			return z
		}
	}
}

// hllTau is Redis' hllTau (Ertl's tau function).
func hllTau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		prev := z
		y *= 0.5
		d := 1 - x
		z -= float64(float64(d*d) * y)
		if prev == z {
			return z / 3
		}
	}
}
