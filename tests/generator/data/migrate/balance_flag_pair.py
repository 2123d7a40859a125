# Written for these tests: the balance_flag pair (the seed's "balance_flag gate"), no early return.
# paired with: v1.0.0
import torch
import torch.distributed as dist
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler


class BalanceScheduler(Scheduler):
    def balance_gather(self, dp_group):
        running_tensor = torch.tensor([len(self.running)], dtype=torch.int, device="cpu")
        dist.all_gather(self.balance_queue, running_tensor, group=dp_group)

    def schedule(self) -> SchedulerOutput:
        scheduled = []
        token_budget = self.max_num_scheduled_tokens
        while self.waiting and token_budget > 0:
            if len(self.running) == self.max_num_running_reqs:
                break

            balance_flag = (max(
                t.item()
                for t in self.balance_queue) == self.max_num_running_reqs)
            if balance_flag:
                break

            request = self.waiting.peek_request()
            self.waiting.pop_request()
            scheduled.append(request)
            token_budget -= 1
        return SchedulerOutput(scheduled)
