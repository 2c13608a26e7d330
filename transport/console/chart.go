package console

import (
	"fmt"
	"math/big"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

// The balance chart is SVG drawn on the server: one bar per day of what an
// agent paid, a dashed line at its daily cap. Geometry is computed here
// in whole pixels from whole micro-units (no floating point touches an
// amount); the template only places the shapes. The same numbers are in a
// table beside it for anyone who does not see the picture.

const (
	chartWidth  = 640
	chartHeight = 220
	plotLeft    = 64
	plotRight   = chartWidth - 12
	plotTop     = 16
	plotBottom  = chartHeight - 36
)

type bar struct {
	X, Y, W, H int
	Over       bool // above the cap
	Day        string
	Amount     string
	LabelX     int
	LabelY     int
	ShowLabel  bool
}

type yLabel struct {
	Y    int
	Text string
}

type chart struct {
	ID                       string
	Title                    string
	Desc                     string
	Width, Height            int
	Left, Right, Top, Bottom int
	Bars                     []bar
	CapY                     int
	CapLabel                 string
	CapLabelX, CapLabelY     int
	LabelX                   int // right edge of the y labels
	YLabels                  []yLabel
	Days                     []actors.DaySpend
	Cap                      policy.Amount
}

func micros(a policy.Amount) *big.Int {
	m, ok := a.Micros()
	if !ok {
		return big.NewInt(0)
	}
	return big.NewInt(m)
}

// scaleY is the height in pixels of v on a plot of span pixels for top.
func scaleY(v, top *big.Int, span int) int {
	if top.Sign() == 0 {
		return 0
	}
	h := new(big.Int).Mul(v, big.NewInt(int64(span)))
	return int(h.Div(h, top).Int64())
}

func dailyChart(n int, name string, days []actors.DaySpend, dailyCap policy.Amount) chart {
	ch := chart{ID: fmt.Sprintf("chart-%d", n), Width: chartWidth, Height: chartHeight,
		Left: plotLeft, Right: plotRight, Top: plotTop, Bottom: plotBottom, Days: days, Cap: dailyCap}
	capM := micros(dailyCap)
	top := new(big.Int).Set(capM)
	over := 0
	peak := policy.MustAmount("0.00")
	for _, d := range days {
		if m := micros(d.Settled); m.Cmp(top) > 0 {
			top = m
		}
		if d.Settled.Cmp(dailyCap) > 0 {
			over++
		}
		peak = policy.MaxAmount(peak, d.Settled)
	}
	// Head room above the tallest of the bars and the cap line.
	top.Add(top, new(big.Int).Div(top, big.NewInt(8)))
	if top.Sign() == 0 {
		top = big.NewInt(1)
	}
	span := plotBottom - plotTop
	slot := (plotRight - plotLeft) / len(days)
	for i, d := range days {
		h := scaleY(micros(d.Settled), top, span)
		b := bar{X: plotLeft + i*slot + slot/6, W: slot - slot/3, H: h, Y: plotBottom - h,
			Over: d.Settled.Cmp(dailyCap) > 0, Day: d.Day.Format("01-02"), Amount: d.Settled.Display(),
			LabelX: plotLeft + i*slot + slot/2, LabelY: plotBottom + 18, ShowLabel: (len(days)-1-i)%2 == 0}
		ch.Bars = append(ch.Bars, b)
	}
	ch.CapY = plotBottom - scaleY(capM, top, span)
	ch.CapLabel = "cap " + dailyCap.Display()
	ch.CapLabelX, ch.CapLabelY = plotRight, ch.CapY-4
	ch.LabelX = plotLeft - 6
	ch.YLabels = []yLabel{{Y: plotBottom + 4, Text: "0"}, {Y: ch.CapY + 4, Text: dailyCap.Display()}}
	ch.Title = fmt.Sprintf("Daily spend of %s over the last %d days against its daily cap of %s", name, len(days), dailyCap.Display())
	ch.Desc = fmt.Sprintf("The highest day was %s; %d of %d days were above the cap. Each day is listed in the table that follows.",
		peak.Display(), over, len(days))
	return ch
}
