package chunkfile_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
)

// lineitemRun returns about n bytes of TPC-H lineitem-shaped text rows ('|'-separated, the 16
// columns of dbgen's lineitem.tbl, values drawn from dbgen's domains), sorted by ship date,
// order key and line number: a sort's spill run. Deterministic: the same n gives the same bytes.
func lineitemRun(n int) []byte {
	lineitemMu.Lock()
	defer lineitemMu.Unlock()
	if b, ok := lineitemCache[n]; ok {
		return b
	}
	rng := rand.New(rand.NewPCG(19920101, uint64(n)))
	type row struct {
		ship, order, line int
		text              string
	}
	var rows []row
	size := 0
	start := dayNumber(1992, 1, 1)
	for order := 1; size < n; order += 1 + rng.IntN(4) { // dbgen's order keys are sparse
		orderDate := start + rng.IntN(2406-151)
		for line := 1; line <= 1+rng.IntN(7) && size < n; line++ {
			part := 1 + rng.IntN(200000)
			supp := 1 + rng.IntN(10000)
			qty := 1 + rng.IntN(50)
			price := float64(qty) * float64(90000+(part/10)%20001+100*(part%1000)) / 100
			ship := orderDate + 1 + rng.IntN(121)
			commit := orderDate + 30 + rng.IntN(61)
			receipt := ship + 1 + rng.IntN(30)
			flag, status := "N", "O"
			if receipt <= dayNumber(1995, 6, 17) {
				flag, status = []string{"R", "A"}[rng.IntN(2)], "F"
			}
			var sb strings.Builder
			fmt.Fprintf(&sb, "%d|%d|%d|%d|%d|%.2f|%.2f|%.2f|%s|%s|%s|%s|%s|%s|%s|%s|\n",
				order, part, supp, line, qty, price, float64(rng.IntN(11))/100, float64(rng.IntN(9))/100,
				flag, status, dateString(ship), dateString(commit), dateString(receipt),
				shipInstructs[rng.IntN(len(shipInstructs))], shipModes[rng.IntN(len(shipModes))], comment(rng))
			rows = append(rows, row{ship, order, line, sb.String()})
			size += sb.Len()
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.ship != b.ship {
			return a.ship - b.ship
		}
		if a.order != b.order {
			return a.order - b.order
		}
		return a.line - b.line
	})
	var buf bytes.Buffer
	for _, r := range rows {
		buf.WriteString(r.text)
	}
	b := buf.Bytes()[:n]
	lineitemCache[n] = b
	return b
}

var (
	lineitemMu    sync.Mutex
	lineitemCache = map[int][]byte{}

	shipInstructs = []string{"DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"}
	shipModes     = []string{"REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"}
	commentWords  = strings.Fields("furiously carefully quickly slyly blithely ironic final regular " +
		"express special pending bold even silent unusual packages requests deposits accounts " +
		"instructions theodolites foxes pinto beans platelets asymptotes dependencies ideas " +
		"sleep wake nag haggle cajole use integrate boost detect are was after among above about")
)

// comment is a dbgen-like text comment of 10 to 43 characters.
func comment(rng *rand.Rand) string {
	limit := 10 + rng.IntN(34)
	var sb strings.Builder
	for sb.Len() < limit {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(commentWords[rng.IntN(len(commentWords))])
	}
	return sb.String()[:limit]
}

var monthDays = []int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

func dayNumber(y, m, d int) int {
	n := 0
	for yy := 1992; yy < y; yy++ {
		n += 365
		if yy%4 == 0 {
			n++
		}
	}
	for mm := 1; mm < m; mm++ {
		n += monthDays[mm-1]
		if mm == 2 && y%4 == 0 {
			n++
		}
	}
	return n + d - 1
}

func dateString(day int) string {
	y := 1992
	for {
		days := 365
		if y%4 == 0 {
			days++
		}
		if day < days {
			break
		}
		day -= days
		y++
	}
	m := 1
	for {
		days := monthDays[m-1]
		if m == 2 && y%4 == 0 {
			days++
		}
		if day < days {
			break
		}
		day -= days
		m++
	}
	return fmt.Sprintf("%04d-%02d-%02d", y, m, day+1)
}
