package console

import (
	"context"
	"time"

	"github.com/agentpay/guard/actors"
)

func init() { pageNames = append(pageNames, "channels") }

// The notification channels page is where the owner confirms a channel
// an owner key added or moved. A channel's links decide approvals, and
// only the owner's own session may open a way to decide: so a channel
// sends nothing until confirmed here, signed in with the password.

type channelsData struct {
	Channels []actors.NotificationChannelView
	Pending  int
	Done     string
}

func (c *Console) channelList(r *request) error {
	chans, err := c.sys.NotificationChannels(r.who)
	if err != nil {
		return fromActors(err, "Notification channels could not be listed")
	}
	d := channelsData{Channels: chans, Done: map[string]string{
		"confirm": "The channel is confirmed: new approvals are sent there, and those already waiting go out now.",
		"remove":  "The channel is removed: nothing more is sent there, and the links it was sent no longer decide.",
	}[query(r, "done")]}
	for _, ch := range chans {
		if ch.Status != actors.ChannelActive {
			d.Pending++
		}
	}
	c.render(r, 200, "channels", "Notification channels", "", d)
	return nil
}

func (c *Console) channelConfirm(r *request) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.sys.ConfirmNotificationChannel(ctx, r.who, param(r, "id")); err != nil {
		return fromActors(err, "The channel was not confirmed")
	}
	return redirect(c.base + "/channels?done=confirm")
}

func (c *Console) channelRemove(r *request) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.sys.DeleteNotificationChannel(ctx, r.who, param(r, "id")); err != nil {
		return fromActors(err, "The channel was not removed")
	}
	return redirect(c.base + "/channels?done=remove")
}
