# Written for these tests: the one-statement gate in `if self._balance_enabled:`, asking upstream's question; upstream's assert kept.
# paired with: v1.2.0
import torch
import torch.distributed as dist
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler


class BalanceScheduler(Scheduler):
    def balance_gather(self, dp_group):
        count = torch.tensor([len(self.running) + self.num_waiting_for_streaming_input], dtype=torch.int)
        dist.all_gather(self.balance_queue, count, group=dp_group)

    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        if not self._balance_enabled:
            return super().schedule(throttle_prefills=throttle_prefills)
        scheduled = []
        token_budget = self.max_num_scheduled_tokens
        while (self.waiting or self.skipped_waiting) and token_budget > 0:
            num_running = len(self.running) + self.num_waiting_for_streaming_input
            if num_running >= self.max_num_running_reqs:
                break
            if self._balance_enabled:
                if max(t.item() for t in self.balance_queue) >= self.max_num_running_reqs:
                    break

            request_queue = self._select_waiting_queue_for_scheduling()
            assert request_queue is not None

            request = request_queue.pop_request()
            if request.num_tokens > token_budget:
                self.skipped_waiting.add_request(request)
                continue
            scheduled.append(request)
            token_budget -= request.num_tokens
        return SchedulerOutput(scheduled)
