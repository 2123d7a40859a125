# Written for these tests: v1.1.0 plus the deltas with one statement changed, run with v1.2.1.
# paired with: v1.2.1
import torch
import torch.distributed as dist
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler


class BalanceScheduler(Scheduler):
    def balance_gather(self, dp_group):
        running = torch.tensor([len(self.running)], dtype=torch.int)
        dist.all_gather(self.balance_queue, running, group=dp_group)

    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        if not self._balance_enabled:
            return super().schedule(throttle_prefills)
        scheduled = []
        token_budget = self.max_num_scheduled_tokens
        while (self.waiting or self.skipped_waiting) and token_budget > 0:
            if len(self.running) == self.max_num_running_reqs:
                break
            if max(t.item() for t in self.balance_queue) == self.max_num_running_reqs:
                break

            request_queue = self._select_waiting_queue_for_scheduling()
            if request_queue is None:
                break

            request = request_queue.pop_request()
            if request.num_tokens > token_budget:
                self.skipped_waiting.add_request(request)
                continue
            scheduled.append(request)
            token_budget -= 1
        return SchedulerOutput(scheduled)
