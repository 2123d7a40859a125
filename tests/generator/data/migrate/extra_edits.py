# Written for these tests: v1.1.0 plus the deltas, plus two edits of another feature, one in the disabled path.
# paired with: v1.1.0
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler


class BalanceScheduler(Scheduler):
    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        if not self._balance_enabled:
            self._last_mode = "off"
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
            self.num_admitted += 1
            token_budget -= request.num_tokens
        return SchedulerOutput(scheduled)
